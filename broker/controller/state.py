"""The controller's replicated state: each broker set's replicas, master, epochs and in-sync set.

RocketMQ 5's ReplicasInfoManager, as a deterministic state machine. Every change is an *event*
applied in log order (the Raft log of :mod:`broker.controller.raft`); ``apply`` is the only
method that mutates, it reads nothing but the state and the event, and it checks each event's
preconditions itself (epochs, the proposing master), so two requests decided against the same
old state cannot both take effect: the second one, applied after the first, is refused. The
leader decides *what* to propose (an election reads its local liveness table, which is not
replicated); this module decides, identically on every controller, *whether* it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.codes import ResponseCode

# Bounds on what hostile or buggy brokers can make the replicated state hold.
MAX_BROKER_SETS = 4096
MAX_REPLICAS_PER_SET = 64
MAX_BROKER_ID = 1 << 31


@dataclass(slots=True)
class BrokerSet:
    """One brokerName: RocketMQ's BrokerReplicaInfo + SyncStateInfo together."""

    cluster_name: str
    broker_name: str
    replicas: dict[int, str] = field(default_factory=dict)  # brokerId -> broker address
    check_codes: dict[int, str] = field(default_factory=dict)  # brokerId -> registerCheckCode
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    def master_address(self) -> str:
        return "" if self.master_id is None else self.replicas.get(self.master_id, "")

    def view(self) -> ReplicaView:
        return ReplicaView(
            cluster_name=self.cluster_name,
            broker_name=self.broker_name,
            master_id=self.master_id,
            master_address=self.master_address(),
            master_epoch=self.master_epoch,
            sync_state_set=frozenset(self.sync_state_set),
            sync_state_set_epoch=self.sync_state_set_epoch,
            replicas=dict(self.replicas),
        )


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A copy of one broker set's state, safe to hand to another thread or the wire."""

    cluster_name: str
    broker_name: str
    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    replicas: dict[int, str]


# ---- events (what the Raft log holds; pickled by pysyncobj, so plain frozen dataclasses) ----


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdEvent:
    """CONTROLLER_APPLY_BROKER_ID: a broker claims ``broker_id`` in its set, proving it is the
    same broker on a retry with ``register_check_code`` (RocketMQ: ``address;timestamp``)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str
    broker_address: str


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddressEvent:
    """CONTROLLER_REGISTER_BROKER: an applied id's (new) address."""

    broker_name: str
    broker_id: int
    broker_address: str


@dataclass(frozen=True, slots=True)
class ElectMasterEvent:
    """The leader's decision: ``new_master_id`` (None: no eligible replica, the set is left
    without a master) replaces the master of epoch ``expected_master_epoch``. A new master's
    in-sync set is itself alone (it grows as the master reports slaves caught up)."""

    broker_name: str
    new_master_id: int | None
    expected_master_epoch: int
    designated: bool = False  # a manual switchover (ElectMaster with designateElect)


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetEvent:
    """CONTROLLER_ALTER_SYNC_STATE_SET from the master ``master_id`` at ``master_epoch``,
    which read the in-sync set at ``sync_state_set_epoch``."""

    broker_name: str
    master_id: int
    master_epoch: int
    sync_state_set_epoch: int
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True)
class ReadReplicaEvent:
    """A read through the log (isProcessReadEvent): answered with the state at its log position,
    so a deposed leader that has not noticed yet cannot answer from an old state. Changes nothing."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class BarrierEvent:
    """A no-op a new leader commits before it reads or decides: once it is applied, every
    event of earlier terms is applied too (Raft commits older terms' entries only with one of
    the current term), so the leader's state is not older than the group's."""

    term: int


Event = (
    ApplyBrokerIdEvent
    | UpdateBrokerAddressEvent
    | ElectMasterEvent
    | AlterSyncStateSetEvent
    | ReadReplicaEvent
    | BarrierEvent
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What applying an event gave: RocketMQ's response code, a reason, and the set after it."""

    code: int
    remark: str | None = None
    view: ReplicaView | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def refused(code: int, remark: str, broker_set: BrokerSet | None = None) -> Outcome:
    return Outcome(code, remark, None if broker_set is None else broker_set.view())


class ReplicasState:
    """Every broker set, changed only by :meth:`apply`."""

    def __init__(self) -> None:
        self.sets: dict[str, BrokerSet] = {}

    # ---- reads ----

    def get(self, broker_name: str) -> BrokerSet | None:
        return self.sets.get(broker_name)

    def view(self, broker_name: str) -> ReplicaView | None:
        broker_set = self.sets.get(broker_name)
        return None if broker_set is None else broker_set.view()

    def views(self) -> list[ReplicaView]:
        return [s.view() for s in self.sets.values()]

    def next_broker_id(self, broker_name: str) -> int:
        """RocketMQ's CONTROLLER_GET_NEXT_BROKER_ID: one past the highest applied id (1 first)."""
        broker_set = self.sets.get(broker_name)
        return 1 if broker_set is None or not broker_set.replicas else max(broker_set.replicas) + 1

    # ---- the one mutator ----

    def apply(self, event: Event) -> Outcome:
        if isinstance(event, ApplyBrokerIdEvent):
            return self._apply_broker_id(event)
        if isinstance(event, UpdateBrokerAddressEvent):
            return self._update_address(event)
        if isinstance(event, ElectMasterEvent):
            return self._elect(event)
        if isinstance(event, AlterSyncStateSetEvent):
            return self._alter_sync_state_set(event)
        if isinstance(event, BarrierEvent):
            return Outcome(ResponseCode.SUCCESS)
        if isinstance(event, ReadReplicaEvent):
            view = self.view(event.broker_name)
            if view is None:
                return refused(
                    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker set {event.broker_name}"
                )
            return Outcome(ResponseCode.SUCCESS, None, view)
        return refused(ResponseCode.CONTROLLER_INVALID_REQUEST, f"unknown event {type(event).__name__}")

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> Outcome:
        if not 0 < event.broker_id < MAX_BROKER_ID:
            return refused(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"brokerId {event.broker_id} out of range"
            )
        broker_set = self.sets.get(event.broker_name)
        if broker_set is None:
            if len(self.sets) >= MAX_BROKER_SETS:
                return refused(ResponseCode.CONTROLLER_INVALID_REQUEST, "too many broker sets")
            broker_set = BrokerSet(event.cluster_name, event.broker_name)
            self.sets[event.broker_name] = broker_set
        held_by = broker_set.check_codes.get(event.broker_id)
        if held_by is not None:
            if held_by != event.register_check_code:
                return refused(
                    ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                    f"brokerId {event.broker_id} of {event.broker_name} is held by another broker",
                    broker_set,
                )
            return Outcome(ResponseCode.SUCCESS, None, broker_set.view())  # the same broker retrying
        if len(broker_set.replicas) >= MAX_REPLICAS_PER_SET:
            return refused(
                ResponseCode.CONTROLLER_INVALID_REQUEST, "too many replicas in the set", broker_set
            )
        broker_set.replicas[event.broker_id] = event.broker_address
        broker_set.check_codes[event.broker_id] = event.register_check_code
        return Outcome(ResponseCode.SUCCESS, None, broker_set.view())

    def _update_address(self, event: UpdateBrokerAddressEvent) -> Outcome:
        broker_set = self.sets.get(event.broker_name)
        if broker_set is None or event.broker_id not in broker_set.replicas:
            return refused(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                f"brokerId {event.broker_id} of {event.broker_name} has not applied for its id",
            )
        broker_set.replicas[event.broker_id] = event.broker_address
        return Outcome(ResponseCode.SUCCESS, None, broker_set.view())

    def _elect(self, event: ElectMasterEvent) -> Outcome:
        broker_set = self.sets.get(event.broker_name)
        if broker_set is None:
            return refused(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker set {event.broker_name}"
            )
        if event.expected_master_epoch != broker_set.master_epoch:
            # Decided against an older state: another election came first.
            return refused(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                f"master epoch is {broker_set.master_epoch}, the election read {event.expected_master_epoch}",
                broker_set,
            )
        new = event.new_master_id
        if new is not None and new not in broker_set.replicas:
            return refused(
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, f"brokerId {new} is not a replica", broker_set
            )
        if new is None and broker_set.master_id is None:
            return refused(
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"no eligible replica to elect in {event.broker_name}",
                broker_set,
            )
        # As RocketMQ's SyncStateInfo.updateMasterInfo: every change of master bumps the epoch,
        # clearing it too, so an old master's requests carry a stale epoch from then on.
        broker_set.master_id = new
        broker_set.master_epoch += 1
        if new is not None:
            broker_set.sync_state_set = {new}
            broker_set.sync_state_set_epoch += 1
        # No master: the in-sync set is kept, so one of its members (and only one of them) can
        # be elected when it comes back.
        return Outcome(ResponseCode.SUCCESS, None, broker_set.view())

    def _alter_sync_state_set(self, event: AlterSyncStateSetEvent) -> Outcome:
        broker_set = self.sets.get(event.broker_name)
        if broker_set is None:
            return refused(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker set {event.broker_name}"
            )
        if broker_set.master_id != event.master_id or broker_set.master_epoch != event.master_epoch:
            return refused(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                f"brokerId {event.master_id} at master epoch {event.master_epoch} is not the master "
                f"(master {broker_set.master_id}, epoch {broker_set.master_epoch})",
                broker_set,
            )
        if broker_set.sync_state_set_epoch != event.sync_state_set_epoch:
            return refused(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"sync state set epoch is {broker_set.sync_state_set_epoch}, "
                f"the request read {event.sync_state_set_epoch}",
                broker_set,
            )
        if event.master_id not in event.new_sync_state_set:
            return refused(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                "the new sync state set lacks the master",
                broker_set,
            )
        unknown = sorted(event.new_sync_state_set - broker_set.replicas.keys())
        if unknown:
            return refused(
                ResponseCode.CONTROLLER_INVALID_REPLICAS, f"brokerIds {unknown} are not replicas", broker_set
            )
        broker_set.sync_state_set = set(event.new_sync_state_set)
        broker_set.sync_state_set_epoch += 1
        return Outcome(ResponseCode.SUCCESS, None, broker_set.view())
