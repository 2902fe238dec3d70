"""The state machine replicated over Raft (pysyncobj), bridged into an asyncio loop.

pysyncobj runs its own thread: it applies committed events to :class:`ReplicasState` there and
calls a proposer's callback there too. The asyncio side never touches the state without the
lock, and gets its answers through ``call_soon_threadsafe`` into a future, so the remoting
server's loop never blocks on Raft.

What pysyncobj snapshots (``fullDumpFile``) is every attribute of the SyncObj set after its
``__init__``: here only ``_state``, so the lock lives on the class and the loop in the
:class:`RaftNode` wrapper.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from broker.common.codes import ResponseCode

from .raft_library import FAIL_REASON, SyncObj, SyncObjConf, replicated
from .state import BarrierEvent, Event, Outcome, ReplicasState, ReplicaView

log = logging.getLogger(__name__)

# Raft timing (seconds): pysyncobj's election timeouts; a leader that hears no majority for
# LEADER_FALLBACK_S steps down (pysyncobj's default, 30 s, would let a cut-off leader keep
# answering reads for half a minute).
RAFT_MIN_TIMEOUT_S = 0.4
RAFT_MAX_TIMEOUT_S = 1.4
LEADER_FALLBACK_S = 3.0
CONNECTION_RETRY_S = 1.0


class _ReplicatedState(SyncObj):
    _lock = threading.Lock()  # on the class: an instance attribute would be snapshotted

    def __init__(self, self_address: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_address, partners, conf)
        self._state = ReplicasState()

    @replicated
    def apply_event(self, event: Event) -> Outcome:
        with self._lock:
            return self._state.apply(event)

    def read(self, broker_name: str) -> ReplicaView | None:
        with self._lock:
            return self._state.view(broker_name)

    def read_all(self) -> list[ReplicaView]:
        with self._lock:
            return self._state.views()

    def next_broker_id(self, broker_name: str) -> int:
        with self._lock:
            return self._state.next_broker_id(broker_name)


@dataclass(frozen=True, slots=True)
class Peer:
    """One controller: its id (``n0``), its Raft address and its remoting address."""

    peer_id: str
    raft_address: str
    listen_address: str


class RaftNode:
    """This controller's member of the group."""

    def __init__(
        self, self_id: str, peers: list[Peer], store_path: Path | None, password: str | None
    ) -> None:
        by_id = {peer.peer_id: peer for peer in peers}
        if self_id not in by_id:
            raise ValueError(f"controllerDLegerSelfId {self_id!r} is not in controllerDLegerPeers")
        self.self_peer = by_id[self_id]
        self.peers = peers
        self._by_raft = {peer.raft_address: peer for peer in peers}
        journal = dump = None
        if store_path is not None:
            store_path.mkdir(parents=True, exist_ok=True)
            journal = str(store_path / "raft.journal")
            dump = str(store_path / "raft.dump")
        conf = SyncObjConf(
            journalFile=journal,
            fullDumpFile=dump,
            raftMinTimeout=RAFT_MIN_TIMEOUT_S,
            raftMaxTimeout=RAFT_MAX_TIMEOUT_S,
            leaderFallbackTimeout=LEADER_FALLBACK_S,
            connectionRetryTime=CONNECTION_RETRY_S,
            commandsWaitLeader=False,  # no leader: fail at once, the broker retries
            useFork=False,  # never fork a process that runs an event loop
            password=password or None,
        )
        self._barrier_term: int | None = None  # the term whose barrier this leader has applied
        partners = [peer.raft_address for peer in peers if peer.peer_id != self_id]
        self.obj = _ReplicatedState(self.self_peer.raft_address, partners, conf)

    # ---- who leads ----

    def is_leader(self) -> bool:
        return bool(self.obj._isLeader())

    def leader(self) -> Peer | None:
        node = self.obj._getLeader()
        if node is None:
            return None
        address = getattr(node, "address", None) or str(node)
        return self._by_raft.get(address)

    def term(self) -> int:
        return int(self.obj._getTerm())

    async def leader_ready(self, timeout_s: float) -> bool:
        """This controller leads and has applied everything committed before its term (its
        barrier is applied): only then does it answer reads or decide elections."""
        if not self.is_leader():
            return False
        term = self.term()
        if self._barrier_term == term:
            return True
        outcome = await self.propose(BarrierEvent(term), timeout_s)
        if outcome.ok and self.is_leader() and self.term() == term:
            self._barrier_term = term
            return True
        return False

    # ---- reads (this controller's committed state) ----

    def read(self, broker_name: str) -> ReplicaView | None:
        return self.obj.read(broker_name)

    def read_all(self) -> list[ReplicaView]:
        return self.obj.read_all()

    def next_broker_id(self, broker_name: str) -> int:
        return self.obj.next_broker_id(broker_name)

    # ---- writes ----

    async def propose(self, event: Event, timeout_s: float) -> Outcome:
        """Append ``event`` to the log and wait until it is applied here; its outcome. Refused
        with CONTROLLER_NOT_LEADER when this controller does not lead or no majority commits it
        in time (a timed-out event may still commit later: every event checks its epochs when
        applied, so a retry cannot apply twice)."""
        if not self.is_leader():
            return self.not_leader()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Outcome] = loop.create_future()

        def settle(result: Outcome | None, error: int) -> None:
            if answer.done():
                return
            if error == FAIL_REASON.SUCCESS and result is not None:
                answer.set_result(result)
            else:
                reason = {
                    FAIL_REASON.NOT_LEADER: "this controller is not the leader",
                    FAIL_REASON.MISSING_LEADER: "no controller leader",
                    FAIL_REASON.LEADER_CHANGED: "the controller leader changed before the write committed",
                    FAIL_REASON.QUEUE_FULL: "the controller's command queue is full",
                    FAIL_REASON.DISCARDED: "the write was discarded",
                }.get(error, f"the write failed (pysyncobj reason {error})")
                answer.set_result(Outcome(ResponseCode.CONTROLLER_NOT_LEADER, reason))

        def from_raft_thread(result: Outcome | None, error: int) -> None:
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the loop closed while the write was pending
                pass

        self.obj.apply_event(event, callback=from_raft_thread)
        try:
            return await asyncio.wait_for(answer, timeout_s)
        except TimeoutError:
            return Outcome(
                ResponseCode.CONTROLLER_NOT_LEADER,
                f"the write was not committed within {timeout_s:g} s: no majority of controllers reachable",
            )

    def not_leader(self) -> Outcome:
        if self.is_leader():
            return Outcome(
                ResponseCode.CONTROLLER_NOT_LEADER,
                "this controller was elected leader but cannot commit: no majority of controllers reachable",
            )
        leader = self.leader()
        where = f"the leader is {leader.peer_id} at {leader.listen_address}" if leader else "no leader known"
        return Outcome(ResponseCode.CONTROLLER_NOT_LEADER, f"this controller is not the leader: {where}")

    def close(self) -> None:
        self.obj.destroy()
