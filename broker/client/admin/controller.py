"""The controller's admin requests (RocketMQ 5's controller mode), for mqadmin and the console.

Over the admin's own ``RemotingClient`` (so they are signed with its ACL account and go over its
TLS): the controller group's metadata, each broker set's in-sync replicas, a manual switchover,
and each broker's epoch cache. Controllers are reached through :class:`ControllerClient`, which
follows CONTROLLER_NOT_LEADER to the leader; every failure becomes an error of the client's tree
that names the controller (or broker) and the reason, as the rest of the admin client's do.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from broker.client.errors import MQBrokerError, MQClientError, NotFoundError, ServerUnreachableError
from broker.common.epoch_entries import EpochEntryCache
from broker.common.hosts import parse_host_list
from broker.controller.client import (
    ControllerClient,
    ControllerError,
    ControllerMetadata,
    ControllerUnreachable,
    ReplicaInfo,
    broker_epoch_cache,
)
from broker.controller.replicas_info import BrokerReplicas

from .core import AdminCore, known_cluster

CONTROLLER = "controller"
T = TypeVar("T")


class ControllerUnreachableError(ServerUnreachableError):
    role = CONTROLLER


def controller_addresses(text: str) -> list[str]:
    """RocketMQ's ``-a host:port;host:port``."""
    addresses = parse_host_list(text or "", "controller address list", error=MQClientError)
    if not addresses:
        raise MQClientError("no controller address given (-a host:port)")
    return addresses


@dataclass(frozen=True)
class BrokerEpochs:
    """One broker's answer to GET_BROKER_EPOCH_CACHE, or why there is none."""

    addr: str
    cache: EpochEntryCache | None
    error: str | None = None


class ControllerAdmin:
    """The controller group at ``controller_addr`` (``host:port;...``), asked over ``core``'s
    connection; ``core`` also resolves brokers and clusters through the name servers."""

    def __init__(self, core: AdminCore, controller_addr: str) -> None:
        self.core = core
        self.addresses = controller_addresses(controller_addr)
        self.client = ControllerClient(self.addresses, core.remoting, int(core.timeout * 1000))

    async def _ask(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except ControllerError as exc:
            where = exc.address or ";".join(self.addresses)
            if exc.code is not None:
                raise MQBrokerError(exc.code, exc.remark, where, CONTROLLER) from None
            if isinstance(exc, ControllerUnreachable):
                raise ControllerUnreachableError(where, exc.remark) from None
            raise MQClientError(f"controller {where}: {exc.remark}") from None

    async def metadata(self) -> ControllerMetadata:
        """What the first given controller that answers says of its group (any controller
        answers; mqadmin getControllerMetaData shows that controller's view)."""
        return await self._ask(self.client.metadata())

    async def sync_state_sets(
        self, broker_names: list[str] | None = None, cluster: str | None = None
    ) -> dict[str, BrokerReplicas]:
        """Each named broker set (or every set of ``cluster``, as the name servers list them; or
        every set the controller knows) as the leader sees it. A name the controller does not
        know raises NotFoundError."""
        if cluster:
            info = known_cluster(await self.core.cluster_info(), cluster)
            broker_names = sorted(b.broker_name for b in info.brokers_of(cluster))
            if not broker_names:
                raise NotFoundError(f"cluster {cluster!r} has no broker set on the name server")
        table = await self._ask(self.client.sync_state_data(broker_names))
        missing = sorted(set(broker_names or ()) - set(table))
        if missing:
            raise NotFoundError(
                f"the controller knows no broker set {', '.join(missing)} "
                "(brokers not in controller mode, or not registered yet)"
            )
        return table

    async def elect_master(self, broker_name: str, broker_id: int, cluster: str = "") -> ReplicaInfo:
        """A manual switchover: ``broker_id`` becomes ``broker_name``'s master (it must be alive
        and in the in-sync set); the controller tells the replicas."""
        return await self._ask(self.client.elect(broker_name, broker_id, designate=True, cluster=cluster))

    async def configs(self) -> dict[str, dict[str, str]]:
        """Each given controller's settings (getControllerConfig), in the order given."""
        return {address: await self._ask(self.client.config(address)) for address in self.addresses}

    async def update_config(self, key: str, value: str) -> None:
        """Set ``key`` on each given controller (each keeps its own settings); the first refusal
        is raised, after the controllers before it took the value."""
        for address in self.addresses:
            await self._ask(self.client.update_config(address, {key: value}))

    async def close(self) -> None:
        await self.client.close()  # the admin's connection stays: the admin closes it


async def broker_addrs_for_epochs(core: AdminCore, target: str | None, cluster: str | None) -> list[str]:
    """mqadmin getBrokerEpoch's brokers: ``-b`` a brokerName (its master and slaves, from the
    name servers) or one broker's host:port, else every broker of ``-c`` cluster."""
    if target and ":" in target:
        return [target]
    info = await core.cluster_info()
    if target:
        data = info.brokers.get(target)
        if data is None or not data.broker_addrs:
            raise NotFoundError(f"no broker named {target!r} on the name server")
        return [addr for _, addr in sorted(data.broker_addrs.items())]
    if cluster:
        addrs = known_cluster(info, cluster).all_addrs(cluster)
        if not addrs:
            raise NotFoundError(f"cluster {cluster!r} has no broker")
        return addrs
    raise MQClientError("a brokerName (-b) or a cluster name (-c) is required")


async def broker_epochs(core: AdminCore, addrs: list[str]) -> list[BrokerEpochs]:
    """Each broker's epoch cache, a failed one as its error (the others are still shown)."""
    out = []
    for addr in addrs:
        try:
            out.append(
                BrokerEpochs(addr, await broker_epoch_cache(core.remoting, addr, int(core.timeout * 1000)))
            )
        except MQClientError as exc:
            out.append(BrokerEpochs(addr, None, str(exc)))
    return out
