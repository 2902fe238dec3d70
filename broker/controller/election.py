"""Who may be master: brokers' liveness (leader-local) and RocketMQ's DefaultElectPolicy.

Liveness is not replicated (as in RocketMQ: each controller keeps the heartbeats it received);
only the leader's decisions, as events, go through the log. Brokers heartbeat to every
controller, so a newly elected leader already knows who is alive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker.common.codes import ResponseCode

from .state import ReplicaView

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000  # RocketMQ's controllerHeartBeatTimeoutMills
MAX_LIVENESS = 65_536  # brokers whose heartbeats are kept at once
STALL_S = 0.5  # a scan this late: the controller itself did not run (see Liveness.stalled)


@dataclass(slots=True)
class Heartbeat:
    """The last BROKER_HEARTBEAT of one broker."""

    address: str
    at: float  # time.monotonic()
    timeout_s: float
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    election_priority: int = 0

    def alive(self, now: float) -> bool:
        return now - self.at <= self.timeout_s


class Liveness:
    """(brokerName, brokerId) → last heartbeat; bounded."""

    def __init__(self, default_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS) -> None:
        self.default_timeout_s = default_timeout_ms / 1000
        self.beats: dict[tuple[str, int], Heartbeat] = {}

    def beat(
        self,
        broker_name: str,
        broker_id: int,
        address: str,
        *,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        timeout_ms: int | None = None,
        election_priority: int | None = None,
        now: float | None = None,
    ) -> bool:
        """Record a heartbeat; False when the table is full of other brokers."""
        key = (broker_name, broker_id)
        if key not in self.beats and len(self.beats) >= MAX_LIVENESS:
            self.expire(now)
            if len(self.beats) >= MAX_LIVENESS:
                return False
        timeout_s = timeout_ms / 1000 if timeout_ms and timeout_ms > 0 else self.default_timeout_s
        self.beats[key] = Heartbeat(
            address,
            time.monotonic() if now is None else now,
            timeout_s,
            epoch or 0,
            max_offset or 0,
            confirm_offset or 0,
            election_priority or 0,
        )
        return True

    def get(self, broker_name: str, broker_id: int) -> Heartbeat | None:
        return self.beats.get((broker_name, broker_id))

    def alive(self, broker_name: str, broker_id: int, now: float | None = None) -> bool:
        beat = self.beats.get((broker_name, broker_id))
        return beat is not None and beat.alive(time.monotonic() if now is None else now)

    def alive_ids(self, broker_name: str, now: float | None = None) -> dict[int, Heartbeat]:
        now = time.monotonic() if now is None else now
        return {bid: b for (name, bid), b in self.beats.items() if name == broker_name and b.alive(now)}

    def stalled(self, seconds: float, now: float | None = None) -> None:
        """The controller did not run for ``seconds``: every heartbeat is aged as if they had not
        passed (up to now), so a broker is judged only by the time it could have been heard. It
        only delays elections; a master's lease counts from heartbeats sent, and ends sooner."""
        now = time.monotonic() if now is None else now
        for beat in self.beats.values():
            beat.at = min(beat.at + seconds, now)

    def expire(self, now: float | None = None) -> None:
        """Forget brokers silent for ten of their timeouts (dead ones count as not alive anyway)."""
        now = time.monotonic() if now is None else now
        for key in [k for k, b in self.beats.items() if now - b.at > 10 * b.timeout_s]:
            del self.beats[key]


@dataclass(frozen=True, slots=True)
class Choice:
    """An election's answer: a master to propose (``master_id``, None meaning "no master") or a
    refusal (``code`` not SUCCESS, with a reason)."""

    code: int
    master_id: int | None = None
    remark: str | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def _rank(candidates: dict[int, Heartbeat]) -> list[int]:
    # The freshest log first (epoch, then offset), then the operator's priority (lower wins, as
    # RocketMQ's electionPriority), then the lowest id, so every run picks the same broker.
    return sorted(
        candidates,
        key=lambda bid: (
            -candidates[bid].epoch,
            -candidates[bid].max_offset,
            candidates[bid].election_priority,
            bid,
        ),
    )


def choose_master(
    broker_set: ReplicaView,
    alive: dict[int, Heartbeat],
    *,
    designated: int | None = None,
    elect_unclean: bool = False,
) -> Choice:
    """RocketMQ's DefaultElectPolicy on ``broker_set`` with the brokers ``alive`` now."""
    alive = {bid: b for bid, b in alive.items() if bid in broker_set.replicas}
    master = broker_set.master_id
    if designated is not None:
        if designated == master and designated in alive:
            return Choice(
                ResponseCode.CONTROLLER_MASTER_STILL_EXIST, master, f"brokerId {designated} is the master"
            )
        if designated not in broker_set.replicas:
            return Choice(
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, None, f"brokerId {designated} is not a replica"
            )
        if designated not in broker_set.sync_state_set and not elect_unclean:
            return Choice(
                ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                None,
                f"brokerId {designated} is not in the sync state set {sorted(broker_set.sync_state_set)}",
            )
        if designated not in alive:
            return Choice(
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, None, f"brokerId {designated} is not alive"
            )
        return Choice(ResponseCode.SUCCESS, designated)
    if master is not None and master in alive:
        return Choice(
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST, master, f"brokerId {master} is the master, alive"
        )
    if not broker_set.sync_state_set:
        # A set that never had a master: any alive replica may be its first.
        candidates = alive
    else:
        candidates = {bid: b for bid, b in alive.items() if bid in broker_set.sync_state_set}
        if not candidates and elect_unclean:
            candidates = alive
    ranked = _rank(candidates)
    if ranked:
        return Choice(ResponseCode.SUCCESS, ranked[0])
    if master is None:
        return Choice(
            ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            None,
            f"no alive replica of {broker_set.broker_name} in the sync state set "
            f"{sorted(broker_set.sync_state_set)}",
        )
    return Choice(ResponseCode.SUCCESS, None)  # the master is gone and nobody may replace it
