"""What the cluster and broker pages read: the replication view with every member, members the
name server dropped, one broker's config and runtime figures, per-master put/get totals, and the
switchover's confirmation plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.common.errors import MQClientError, NotFoundError
from console.services.replication import replication_view, switchover_plan
from console.services.vanished_brokers import vanished_brokers
from core.boundary import Cluster


def replication(cluster: Cluster):
    return replication_view(cluster.admin)


def namesrv_addrs(cluster: Cluster) -> list[str]:
    return list(cluster.admin.namesrv_addrs)


def vanished(cluster: Cluster, listed: set[tuple[str, int]]):
    """Members the name server dropped (a stopped broker): only the metric history knows them."""
    return vanished_brokers(cluster.namesrv, listed)


@dataclass(frozen=True)
class BrokerView:
    broker_name: str
    broker_id: int
    config: Any  # the broker's config values and what waits for a restart
    runtime: dict[str, str]


def broker(cluster: Cluster, addr: str) -> BrokerView:
    """``NotFoundError`` for an address no broker registered on the name server has."""
    admin = cluster.admin
    name, broker_id = _member_at(admin, addr)
    return BrokerView(name, broker_id, admin.broker_config_state(addr), admin.broker_runtime_info(addr))


def _member_at(admin, addr: str) -> tuple[str, int]:
    """The broker name and id of the member listening at ``addr``."""
    for data in admin.cluster_info().brokers.values():
        for broker_id, member_addr in data.broker_addrs.items():
            if member_addr == addr:
                return data.broker_name, broker_id
    namesrv = ";".join(admin.namesrv_addrs)
    raise NotFoundError(f"no broker at {addr} is registered on name server {namesrv}")


def put_get_totals(cluster: Cluster) -> tuple[dict[str, int], list[str]]:
    """Running put/get totals per broker master, and the error of each master that did not answer."""
    admin = cluster.admin
    counters: dict[str, int] = {}
    errors = []
    for data in sorted(admin.cluster_info().brokers.values(), key=lambda b: b.broker_name):
        if not data.master_addr:
            continue
        try:
            info = admin.broker_runtime_info(data.master_addr)
        except MQClientError as exc:
            errors.append(str(exc))
            continue
        counters[f"{data.broker_name} put"] = int(info.get("msgPutTotalTodayNow") or 0)
        counters[f"{data.broker_name} get"] = int(info.get("msgGetTotalTodayNow") or 0)
    return counters, errors


def switchover_confirmation(cluster: Cluster, broker_name: str, broker_id: int):
    """The set as the controller sees it now and the replica to promote (``SwitchoverRefused``,
    ``ControllerError`` as ``switchover_plan`` raises them)."""
    return switchover_plan(cluster.admin, broker_name, broker_id)
