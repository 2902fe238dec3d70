"""The CONTROLLER_GET_SYNC_STATE_DATA body: RocketMQ's BrokerReplicasInfo, both ways.

``{"replicasInfoTable": {brokerName: ReplicasInfo}}`` where a ReplicasInfo names the master
(id, address, epoch), the in-sync set's epoch and every replica (id, address, whether the
controller leader hears it) split into in-sync and not-in-sync. The controller writes it, mqadmin
``getSyncStateSet`` and the console read it; what a reader gets from a socket is bounded and
checked before it becomes a :class:`BrokerReplicas`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .state import MAX_BROKER_ID, MAX_REPLICAS_PER_SET, ReplicaView

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_SETS = 100_000
MAX_TEXT = 512  # a brokerName, clusterName or address longer than this is refused


class ReplicasBodyError(ValueError):
    """A CONTROLLER_GET_SYNC_STATE_DATA body that is not a BrokerReplicasInfo."""


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    broker_id: int
    broker_address: str
    alive: bool


@dataclass(frozen=True, slots=True)
class BrokerReplicas:
    """One broker set as the controller leader sees it (RocketMQ's ReplicasInfo)."""

    broker_name: str
    cluster_name: str
    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    in_sync: tuple[ReplicaIdentity, ...]
    not_in_sync: tuple[ReplicaIdentity, ...]

    @property
    def sync_state_set(self) -> frozenset[int]:
        return frozenset(r.broker_id for r in self.in_sync)


# ---- writing (the controller) ----


def replicas_info(view: ReplicaView, alive: set[int]) -> dict:
    """One set as a ReplicasInfo: the in-sync and the other replicas, each with its address and
    whether the leader hears it."""

    def identity(bid: int) -> dict:
        return {
            "brokerName": view.broker_name,
            "brokerId": bid,
            "brokerAddress": view.replicas.get(bid, ""),
            "alive": bid in alive,
        }

    in_sync = [identity(b) for b in sorted(view.sync_state_set)]
    others = [identity(b) for b in sorted(view.replicas) if b not in view.sync_state_set]
    return {
        "clusterName": view.cluster_name,
        "masterBrokerId": view.master_id,
        "masterAddress": view.master_address,
        "masterEpoch": view.master_epoch,
        "syncStateSetEpoch": view.sync_state_set_epoch,
        "inSyncReplicas": in_sync,
        "notInSyncReplicas": others,
    }


def encode_table(views: list[ReplicaView], alive_of) -> bytes:
    """``alive_of(brokerName)`` gives the ids the leader hears."""
    table = {v.broker_name: replicas_info(v, set(alive_of(v.broker_name))) for v in views}
    return json.dumps({"replicasInfoTable": table}).encode()


# ---- reading (mqadmin, the console) ----


def _text(raw: dict, key: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ReplicasBodyError(f"{key} must be a string of at most {MAX_TEXT} characters")
    return value


def _int(raw: dict, key: str, *, nullable: bool = False) -> int | None:
    value = raw.get(key)
    if value is None and nullable:
        return None
    if value is None:
        return 0
    if type(value) is not int:
        raise ReplicasBodyError(f"{key} must be an integer, not {str(value)[:32]!r}")
    if not -1 <= value < 1 << 63:
        raise ReplicasBodyError(f"{key} {value} out of range")
    return value


def _identities(raw: dict, key: str) -> tuple[ReplicaIdentity, ...]:
    items = raw.get(key)
    if items is None:
        return ()
    if not isinstance(items, list) or len(items) > MAX_REPLICAS_PER_SET:
        raise ReplicasBodyError(f"{key} must be a list of at most {MAX_REPLICAS_PER_SET} replicas")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ReplicasBodyError(f"{key}: a replica must be an object")
        broker_id = _int(item, "brokerId")
        assert broker_id is not None
        if not 0 <= broker_id < MAX_BROKER_ID:
            raise ReplicasBodyError(f"{key}: brokerId {broker_id} out of range")
        alive = item.get("alive", False)
        if type(alive) is not bool:
            raise ReplicasBodyError(f"{key}: alive must be true or false")
        out.append(ReplicaIdentity(broker_id, _text(item, "brokerAddress"), alive))
    return tuple(out)


def _replicas(name: str, raw: object) -> BrokerReplicas:
    if not isinstance(raw, dict):
        raise ReplicasBodyError(f"broker set {name[:64]!r}: not an object")
    master_id = _int(raw, "masterBrokerId", nullable=True)
    return BrokerReplicas(
        broker_name=name,
        cluster_name=_text(raw, "clusterName"),
        master_id=master_id if master_id is not None and master_id >= 0 else None,
        master_address=_text(raw, "masterAddress"),
        master_epoch=_int(raw, "masterEpoch") or 0,
        sync_state_set_epoch=_int(raw, "syncStateSetEpoch") or 0,
        in_sync=_identities(raw, "inSyncReplicas"),
        not_in_sync=_identities(raw, "notInSyncReplicas"),
    )


def decode_table(body: bytes) -> dict[str, BrokerReplicas]:
    """brokerName -> its replicas, sorted by name; raises :class:`ReplicasBodyError`."""
    if len(body) > MAX_BODY_BYTES:
        raise ReplicasBodyError("the sync state body is too large")
    try:
        raw = json.loads(body) if body else {}
    except ValueError as exc:
        raise ReplicasBodyError(f"the sync state body is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ReplicasBodyError("the sync state body must be an object")
    table = raw.get("replicasInfoTable")
    if table is None:
        return {}
    if not isinstance(table, dict) or len(table) > MAX_SETS:
        raise ReplicasBodyError("replicasInfoTable must be an object of broker sets")
    out = {}
    for name in sorted(table):
        if len(name) > MAX_TEXT:
            raise ReplicasBodyError("a brokerName is too long")
        out[name] = _replicas(name, table[name])
    return out
