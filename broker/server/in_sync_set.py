"""Which slaves a controller-mode master counts as in sync (RocketMQ 5's SyncStateSet, as
AutoSwitchHAService's maybeExpandInSyncStateSet and maybeShrinkSyncStateSet decide it).

Checked every ``checkSyncStateSetPeriod``; each check compares what every connected slave has
confirmed with where the master's log ended at the previous check:

- a slave *caught up* at a check when it confirmed at least that previous end (it keeps pace with
  what the master had a period ago, however busy the master is now);
- a member leaves when it has not caught up for ``haMaxTimeSlaveNotCatchup``, or is not connected
  at all (as RocketMQ: a set naming a slave that cannot acknowledge would stall every send that
  waits for the whole set);
- a slave outside the set joins in two steps. Once it caught up, is within ``haMaxGapNotInSync``
  bytes of the log's end and holds the current epoch's start (it has cut any divergent tail and
  follows this master's epoch), it is *joining*: from then on sends also wait for it
  (``waited_for``), and the log's end at that moment is its gate. It joins once it confirmed the
  gate. So with allAckInSyncStateSet, every message answered before it joined is on it too (those
  before the gate: it holds them; those after: they waited for it), and electing any member never
  loses an answered message. (Joining at the first check would leave the messages answered
  between its confirmation and the check on the master alone.)

The master itself is always a member. The result is proposed to the controller, which fences it
by the master's epoch and the set's epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SlaveAck:
    broker_id: int
    ack_offset: int


class InSyncTracker:
    def __init__(self, master_id: int, log_end: int, now: float) -> None:
        self.master_id = master_id
        self.previous_end = log_end
        self.since = now  # when this master began: the grace of members never seen yet
        self.caught_up_at: dict[int, float] = {}
        self.joining: dict[int, int] = {}  # brokerId -> the log's end it must confirm to join

    def waited_for(self, members: frozenset[int]) -> frozenset[int]:
        """The slaves a send waiting for the whole set waits for: members and joining slaves."""
        return (members | self.joining.keys()) - {self.master_id}

    def check(
        self,
        members: frozenset[int],
        slaves: Iterable[SlaveAck],
        log_end: int,
        epoch_start: int,
        max_gap: int,
        max_behind_s: float,
        now: float,
    ) -> frozenset[int]:
        """The set this master should have now (``members`` when nothing changes)."""
        connected: dict[int, int] = {}
        for slave in slaves:
            if slave.broker_id != self.master_id:
                connected[slave.broker_id] = max(slave.ack_offset, connected.get(slave.broker_id, -1))
        for broker_id, acked in connected.items():
            if acked >= self.previous_end:
                self.caught_up_at[broker_id] = now

        def keeps_pace(broker_id: int) -> bool:
            return now - self.caught_up_at.get(broker_id, self.since) <= max_behind_s

        wanted = {self.master_id}
        wanted.update(b for b in members if b in connected and keeps_pace(b))
        for broker_id in list(self.joining):
            if broker_id in members or broker_id not in connected or not keeps_pace(broker_id):
                del self.joining[broker_id]
        for broker_id, acked in connected.items():
            if broker_id in members:
                continue
            gate = self.joining.get(broker_id)
            if gate is not None:
                if acked >= gate:
                    wanted.add(broker_id)
            elif (
                self.caught_up_at.get(broker_id) == now
                and acked >= epoch_start
                and log_end - acked <= max_gap
            ):
                self.joining[broker_id] = log_end
        self.previous_end = log_end
        return frozenset(wanted)
