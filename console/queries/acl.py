"""What the ACL page reads: each broker's ACL config version, accounts and global white list, and
whether it runs with ACL at all."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from broker.client.admin import AclConfig, AclVersion, AsyncMQAdmin, BrokerOutcome
from console.timestamps import ms_to_datetime
from core.boundary import Cluster


@dataclass
class BrokerAcl:
    """What the page shows of one broker."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    version: AclVersion | None = None
    config: AclConfig | None = None
    error: str | None = None
    acl_off: bool = False  # the broker runs with aclEnable=false

    @property
    def role(self) -> str:
        return "master" if self.broker_id == 0 else f"slave {self.broker_id}"

    @property
    def updated(self):
        return ms_to_datetime(self.version.timestamp) if self.version else None

    @property
    def accounts(self) -> list[dict[str, Any]]:
        return [account.masked() for account in self.config.accounts] if self.config else []


def brokers(cluster: Cluster) -> list[BrokerAcl]:
    """Every broker's ACL version, accounts (secret keys masked) and global white list, or why not."""
    admin = cluster.admin
    info = admin.cluster_info()
    rows = [
        BrokerAcl(cluster, data.broker_name, broker_id, addr)
        for cluster in sorted(info.clusters)
        for data in sorted(info.brokers_of(cluster), key=lambda b: b.broker_name)
        for broker_id, addr in sorted(data.broker_addrs.items())
    ]
    addrs = [row.addr for row in rows]

    async def ask_all() -> tuple[list[BrokerOutcome], list[BrokerOutcome], list[BrokerOutcome]]:
        # Every question to every broker at once: a broker that does not answer costs one timeout.
        return await asyncio.gather(
            admin.core.each_broker(addrs, AsyncMQAdmin.acl_version),
            admin.core.each_broker(addrs, AsyncMQAdmin.acl_config),
            admin.core.each_broker(addrs, AsyncMQAdmin.broker_config),
        )

    versions, configs, settings = admin.run(ask_all())
    for row, version, config, setting in zip(rows, versions, configs, settings, strict=True):
        row.version, row.config = version.result, config.result
        row.acl_off = config.result is None and _acl_disabled(setting.result)
        # The config's refusal says most; one of the two. ACL off is no error: the broker was set so.
        row.error = None if row.acl_off else (config.error or version.error)
    return rows


def _acl_disabled(broker_config: dict[str, str] | None) -> bool:
    """The broker's own config says it runs without ACL (RocketMQ's default is off)."""
    return broker_config is not None and broker_config.get("aclEnable", "false").strip().lower() != "true"
