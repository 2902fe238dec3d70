"""What a broker (or mqadmin, or the console) uses to speak to the controllers.

It finds the leader with CONTROLLER_GET_METADATA_INFO, sends writes and replica reads there and
follows CONTROLLER_NOT_LEADER to the new leader; heartbeats go to every controller (each keeps
its own liveness table, so a new leader already knows who is alive). Refusals raise
:class:`ControllerError` with RocketMQ's code and the controller's reason (the one error tree,
:mod:`broker.common.errors`, holds it; it stays importable from here).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from broker.common.codes import RequestCode, ResponseCode
from broker.common.conf_file import format_properties, parse_properties
from broker.common.epoch_entries import EpochBodyError, EpochEntryCache
from broker.common.errors import (
    BrokerUnreachableError,
    ControllerError,
    ControllerUnreachable,
    MQBrokerError,
    MQClientError,
)
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
from .state import MAX_REPLICAS_PER_SET

TIMEOUT_MS = 3000
MAX_BODY_BYTES = 1024 * 1024  # a replica answer names at most 64 replicas


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A broker set as the controller leader answered it."""

    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    # brokerId -> address of every replica, when the answer names them (an election's does)
    broker_addrs: dict[int, str] = field(default_factory=dict)


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
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ControllerError(None, f"the controller's {name} {raw[:32]!r} is not a number") from None


def _json_body(response: RemotingCommand) -> dict:
    """The answer's JSON object (a SyncStateSet, an election's member group), bounded."""
    if not response.body:
        return {}
    if len(response.body) > MAX_BODY_BYTES:
        raise ControllerError(None, "the controller's answer is too large")
    try:
        body = json.loads(response.body)
    except ValueError:
        raise ControllerError(None, "the controller's answer is not JSON") from None
    if not isinstance(body, dict):
        raise ControllerError(None, "the controller's answer is not a JSON object")
    return body


def _ids(raw: object) -> frozenset[int]:
    if not isinstance(raw, list) or len(raw) > MAX_REPLICAS_PER_SET or not all(type(i) is int for i in raw):
        raise ControllerError(None, "the controller's syncStateSet is not a list of broker ids")
    return frozenset(raw)


def _epoch(raw: object) -> int:
    if type(raw) is not int:
        raise ControllerError(None, "the controller's syncStateSetEpoch is not a number")
    return raw


def _broker_addrs(body: dict) -> dict[int, str]:
    group = body.get("brokerMemberGroup")
    addrs = group.get("brokerAddrs") if isinstance(group, dict) else None
    if not isinstance(addrs, dict) or len(addrs) > MAX_REPLICAS_PER_SET:
        return {}
    out = {}
    for key, value in addrs.items():
        if isinstance(key, str) and key.isdigit() and isinstance(value, str) and len(value) <= 255:
            out[int(key)] = value
    return dict(sorted(out.items()))


def _replica_info(response: RemotingCommand) -> ReplicaInfo:
    body = _json_body(response)
    header_epoch = _int(response, "syncStateSetEpoch") or 0
    return ReplicaInfo(
        master_id=_int(response, "masterBrokerId"),
        master_address=(response.field("masterAddress") or "")[:255],
        master_epoch=_int(response, "masterEpoch") or 0,
        sync_state_set=_ids(body.get("syncStateSet", [])),
        sync_state_set_epoch=_epoch(body.get("syncStateSetEpoch", header_epoch)),
        broker_addrs=_broker_addrs(body),
    )


class ControllerClient:
    def __init__(
        self, addresses: list[str], remoting: RemotingClient | None = None, timeout_ms: int = TIMEOUT_MS
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = list(addresses)
        self.timeout_ms = timeout_ms
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
                    candidate, create_request(RequestCode.CONTROLLER_GET_METADATA_INFO), self.timeout_ms
                )
            except RemotingError as exc:
                failures.append(str(exc))
                continue
            self._check(response, candidate)
            return ControllerMetadata(
                address=candidate,
                group=(response.field("group") or "")[:256],
                leader_id=(response.field("controllerLeaderId") or None),
                leader_address=(response.field("controllerLeaderAddress") or None),
                is_leader=(response.field("isLeader") or "").lower() == "true",
                peers=_peers(response.field("peers") or ""),
            )
        raise ControllerUnreachable(failures)

    async def find_leader(self) -> str:
        unreachable: list[str] = []
        for address in self.addresses:
            try:
                response = await self.remoting.invoke(
                    address, create_request(RequestCode.CONTROLLER_GET_METADATA_INFO), self.timeout_ms
                )
            except RemotingError as exc:
                unreachable.append(str(exc))
                continue
            leader = response.field("controllerLeaderAddress") if response.ok else None
            if leader:
                self._leader = leader
                return leader
        if len(unreachable) == len(self.addresses):
            raise ControllerUnreachable(unreachable)
        raise ControllerError(
            None, f"no controller leader known by any of {self.addresses} (the group has no quorum?)"
        )

    async def _to_leader(self, code: int, header: CommandHeader | None, body: bytes = b"") -> RemotingCommand:
        """The leader's answer; refusals other than CONTROLLER_NOT_LEADER are raised."""
        last = ControllerError(None, "no controller answered")
        for _ in range(2):  # the cached leader, then the one the group names now
            leader = self._leader or await self.find_leader()
            try:
                response = await self.remoting.invoke(
                    leader, create_request(code, header, body), self.timeout_ms
                )
            except RemotingError as exc:
                self._leader = None
                last = ControllerUnreachable([str(exc)])
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self._leader = None
                last = ControllerError(response.code, response.remark or "not the leader", leader)
                continue
            if not response.ok:
                raise ControllerError(response.code, response.remark or "", leader)
            return response
        raise last

    @staticmethod
    def _check(response: RemotingCommand, address: str | None = None) -> RemotingCommand:
        if not response.ok:
            raise ControllerError(response.code, response.remark or "", address)
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
        return sum(await asyncio.gather(*(self.heartbeat_to(a, header) for a in self.addresses)))

    async def heartbeat_to(
        self, address: str, header: BrokerHeartbeatRequestHeader, timeout_ms: int | None = None
    ) -> bool:
        """BROKER_HEARTBEAT to one controller; whether it took it (unreachable: False)."""
        try:
            request = create_request(RequestCode.BROKER_HEARTBEAT, header)
            return (await self.remoting.invoke(address, request, timeout_ms or self.timeout_ms)).ok
        except RemotingError:
            return False

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
        stored = _json_body(response)
        return _ids(stored.get("syncStateSet")), _epoch(stored.get("syncStateSetEpoch"))

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

    async def _to(self, address: str, code: int, body: bytes = b"") -> RemotingCommand:
        """One controller's answer (not the leader's: each keeps its own settings)."""
        try:
            response = await self.remoting.invoke(address, create_request(code, None, body), self.timeout_ms)
        except RemotingError as exc:
            raise ControllerUnreachable([str(exc)]) from None
        return self._check(response, address)

    async def config(self, address: str) -> dict[str, str]:
        """GET_CONTROLLER_CONFIG: ``address``'s settings under RocketMQ's key names."""
        response = await self._to(address, RequestCode.GET_CONTROLLER_CONFIG)
        if len(response.body) > MAX_BODY_BYTES:
            raise ControllerError(None, "the controller's config answer is too large", address)
        return parse_properties(response.body.decode("utf-8", errors="replace"))

    async def update_config(self, address: str, updates: dict[str, str]) -> None:
        """UPDATE_CONTROLLER_CONFIG: only live settings; refused ones raise ControllerError."""
        await self._to(address, RequestCode.UPDATE_CONTROLLER_CONFIG, format_properties(updates).encode())

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


async def broker_epoch_cache(
    remoting: RemotingClient, broker_addr: str, timeout_ms: int = TIMEOUT_MS
) -> EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE (1007) to one broker: the epochs of its commit log and its max
    offset. A refusal raises MQBrokerError, no answer BrokerUnreachableError, a body that is
    not an EpochEntryCache MQClientError."""
    try:
        response = await remoting.invoke(
            broker_addr, create_request(RequestCode.GET_BROKER_EPOCH_CACHE), timeout_ms
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
