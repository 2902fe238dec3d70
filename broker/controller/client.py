"""What a broker (or mqadmin, or the console) uses to speak to the controllers.

It finds the leader with CONTROLLER_GET_METADATA_INFO, sends writes and replica reads there and
follows CONTROLLER_NOT_LEADER to the new leader; heartbeats go to every controller (each keeps
its own liveness table, so a new leader already knows who is alive). Refusals raise
:class:`ControllerError` with RocketMQ's code and the controller's reason.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from broker.client.errors import BrokerUnreachableError, MQBrokerError, MQClientError
from broker.common.codes import RequestCode, ResponseCode, code_name
from broker.common.epoch_entries import EpochBodyError, EpochEntryCache
from broker.common.request_headers.base import CommandHeader
from broker.common.request_headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.errors import RemotingError

from .replicas_info import BrokerReplicas, ReplicasBodyError, decode_table

TIMEOUT_MS = 3000


class ControllerError(Exception):
    """A controller's refusal (``code`` is RocketMQ's), or no controller reachable (code None)."""

    def __init__(self, code: int | None, remark: str) -> None:
        super().__init__(f"{code_name(code)}: {remark}" if code is not None else remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A broker set as the controller leader answered it."""

    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True, slots=True)
class ControllerMetadata:
    """CONTROLLER_GET_METADATA_INFO as one controller answered it: its group, the leader it
    knows of (None while there is none), whether it leads itself, and the group's members as
    ``id -> remoting address``."""

    address: str
    group: str
    leader_id: str | None
    leader_address: str | None
    is_leader: bool
    peers: dict[str, str]


def _peers(raw: str) -> dict[str, str]:
    """``n0-127.0.0.1:9878;n1-...`` (at most a few peers: a longer text is cut, not parsed)."""
    out: dict[str, str] = {}
    for item in raw[:4096].split(";"):
        peer_id, sep, address = item.strip().partition("-")
        if sep and peer_id and address:
            out[peer_id] = address
    return out


def _int(response: RemotingCommand, name: str) -> int | None:
    raw = response.field(name)
    return int(raw) if raw not in (None, "") else None


def _replica_info(response: RemotingCommand) -> ReplicaInfo:
    body = json.loads(response.body) if response.body else {}
    return ReplicaInfo(
        master_id=_int(response, "masterBrokerId"),
        master_address=response.field("masterAddress") or "",
        master_epoch=_int(response, "masterEpoch") or 0,
        sync_state_set=frozenset(body.get("syncStateSet", ())),
        sync_state_set_epoch=int(body.get("syncStateSetEpoch", _int(response, "syncStateSetEpoch") or 0)),
    )


class ControllerClient:
    def __init__(self, addresses: list[str], remoting: RemotingClient | None = None) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = list(addresses)
        self.remoting = remoting or RemotingClient()
        self._owns_remoting = remoting is None
        self._leader: str | None = None

    async def close(self) -> None:
        if self._owns_remoting:
            await self.remoting.close()

    # ---- finding the leader ----

    async def metadata(self, address: str | None = None) -> ControllerMetadata:
        """What ``address`` (default: the first controller that answers) says of its group."""
        failures = []
        for candidate in [address] if address else self.addresses:
            try:
                response = await self.remoting.invoke(
                    candidate, create_request(RequestCode.CONTROLLER_GET_METADATA_INFO), TIMEOUT_MS
                )
            except RemotingError as exc:
                failures.append(f"{candidate}: {exc}")
                continue
            self._check(response)
            return ControllerMetadata(
                address=candidate,
                group=(response.field("group") or "")[:256],
                leader_id=(response.field("controllerLeaderId") or None),
                leader_address=(response.field("controllerLeaderAddress") or None),
                is_leader=(response.field("isLeader") or "").lower() == "true",
                peers=_peers(response.field("peers") or ""),
            )
        raise ControllerError(None, "no controller answered: " + "; ".join(failures))

    async def find_leader(self) -> str:
        for address in self.addresses:
            try:
                response = await self.remoting.invoke(
                    address, create_request(RequestCode.CONTROLLER_GET_METADATA_INFO), TIMEOUT_MS
                )
            except RemotingError:
                continue
            leader = response.field("controllerLeaderAddress") if response.ok else None
            if leader:
                self._leader = leader
                return leader
        raise ControllerError(None, f"no controller leader known by any of {self.addresses}")

    async def _to_leader(self, code: int, header: CommandHeader | None, body: bytes = b"") -> RemotingCommand:
        """The leader's answer; refusals other than CONTROLLER_NOT_LEADER are raised."""
        last = ControllerError(None, "no controller answered")
        for _ in range(2):  # the cached leader, then the one the group names now
            leader = self._leader or await self.find_leader()
            try:
                response = await self.remoting.invoke(leader, create_request(code, header, body), TIMEOUT_MS)
            except RemotingError as exc:
                self._leader = None
                last = ControllerError(None, str(exc))
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self._leader = None
                last = ControllerError(response.code, response.remark or "not the leader")
                continue
            return response
        raise last

    @staticmethod
    def _check(response: RemotingCommand) -> RemotingCommand:
        if not response.ok:
            raise ControllerError(response.code, response.remark or "")
        return response

    # ---- a broker's requests, in RocketMQ 5.1's order ----

    async def next_broker_id(self, cluster: str, broker_name: str) -> int:
        response = self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(cluster, broker_name)
            )
        )
        return int(response.field("nextBrokerId") or 0)

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(cluster, broker_name, broker_id, check_code),
            )
        )

    async def register(self, cluster: str, broker_name: str, broker_id: int, address: str) -> ReplicaInfo:
        response = self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_REGISTER_BROKER,
                RegisterBrokerToControllerRequestHeader(cluster, broker_name, broker_id, address),
            )
        )
        return _replica_info(response)

    async def heartbeat(self, header: BrokerHeartbeatRequestHeader) -> int:
        """To every controller at once; how many took it."""

        async def one(address: str) -> bool:
            try:
                request = create_request(RequestCode.BROKER_HEARTBEAT, header)
                return (await self.remoting.invoke(address, request, TIMEOUT_MS)).ok
            except RemotingError:
                return False

        return sum(await asyncio.gather(*(one(a) for a in self.addresses)))

    async def replica_info(self, broker_name: str) -> ReplicaInfo:
        response = self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(broker_name)
            )
        )
        return _replica_info(response)

    async def alter_sync_state_set(
        self, broker_name: str, master_id: int, master_epoch: int, ids: set[int], sync_state_set_epoch: int
    ) -> tuple[frozenset[int], int]:
        """The master's new in-sync set; the set and its new epoch as the controller stored them."""
        body = json.dumps({"syncStateSet": sorted(ids), "syncStateSetEpoch": sync_state_set_epoch}).encode()
        response = self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                AlterSyncStateSetRequestHeader(broker_name, master_id, master_epoch),
                body,
            )
        )
        stored = json.loads(response.body)
        return frozenset(stored["syncStateSet"]), int(stored["syncStateSetEpoch"])

    async def elect(
        self, broker_name: str, broker_id: int | None = None, *, designate: bool = False, cluster: str = ""
    ) -> ReplicaInfo:
        """An election (the broker ``broker_id`` triggering it) or, with ``designate``, a
        switchover to ``broker_id``. CONTROLLER_MASTER_STILL_EXIST is raised like any refusal."""
        response = self._check(
            await self._to_leader(
                RequestCode.CONTROLLER_ELECT_MASTER,
                ElectMasterRequestHeader(broker_name, cluster, broker_id, designate_elect=designate),
            )
        )
        return _replica_info(response)

    async def switchover(self, broker_name: str, broker_id: int) -> ReplicaInfo:
        """Make ``broker_id`` the master of ``broker_name`` (mqadmin electMaster, the console's
        switchover); refused unless it is alive and in the in-sync set."""
        return await self.elect(broker_name, broker_id, designate=True)

    async def sync_state_data(self, broker_names: list[str] | None = None) -> dict[str, BrokerReplicas]:
        """Each broker set's master, epochs and replicas as the leader sees them (all sets when
        ``broker_names`` is None); unknown names are simply absent from the answer."""
        body = json.dumps(list(broker_names)).encode() if broker_names is not None else b""
        response = self._check(await self._to_leader(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, body))
        try:
            return decode_table(response.body)
        except ReplicasBodyError as exc:
            raise ControllerError(None, f"the controller's sync state answer is malformed: {exc}") from None


async def broker_epoch_cache(remoting: RemotingClient, broker_addr: str) -> EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE (1007) to one broker: the epochs of its commit log and its max
    offset. A refusal raises MQBrokerError, no answer BrokerUnreachableError, a body that is
    not an EpochEntryCache MQClientError."""
    try:
        response = await remoting.invoke(
            broker_addr, create_request(RequestCode.GET_BROKER_EPOCH_CACHE), TIMEOUT_MS
        )
    except RemotingError as exc:
        remoting.close_connection(broker_addr)
        raise BrokerUnreachableError(broker_addr, str(exc)) from None
    if not response.ok:
        raise MQBrokerError(response.code, response.remark, broker_addr, "broker")
    try:
        return EpochEntryCache.decode(response.body)
    except EpochBodyError as exc:
        raise MQClientError(f"broker {broker_addr} answered a malformed epoch cache: {exc}") from None
