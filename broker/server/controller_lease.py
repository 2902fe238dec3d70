"""A controller-mode master's lease: it takes writes only while the controller has heard from it
recently enough that it cannot have elected another master yet.

The controller takes a broker for dead ``controllerHeartBeatTimeoutMills`` after the last
heartbeat it *received* from it (the broker sends that timeout in each heartbeat), and only then
may it elect a replacement, which then still has to hear of it, switch role and be found by
producers. The lease counts from when a heartbeat the controller leader acknowledged was *sent*,
which is never after the controller received it, and lasts two thirds of that timeout. So it
ends at least a third of the timeout (3.3 s by default) before any election can happen: room for
a put already inside the store when the lease ends, a busy event loop running the expiry late,
and the two machines' clocks running at slightly different rates. The timeout being at least
three heartbeat intervals (checked at load), two heartbeats may be lost in a row before a healthy
master fences itself.

Only the leader's acknowledgement counts, and only while it says it leads (asked with each
heartbeat to it): liveness is the leader's own table. What remains is a leader deposed without
knowing it yet (a partition): its acknowledgements count until it learns (its Raft election
timeout), while the new leader, if it cannot hear this broker, judges it by the heartbeats it
last received. With several controllers that window is the controllers' to keep short; the
epochs still fence such a master at its next in-sync set change.

When the lease ends the master is *silent* (it cannot tell whether it was replaced) until a
heartbeat is acknowledged again *and* the leader's replica info names it master at its epoch
still (an acknowledgement alone does not say that nobody else was elected meanwhile): the
controllers' epochs remain the authority on who is master.

A silent master keeps taking writes while its in-sync slaves acknowledge them: the controller
down must not stop every write. Each write then waits for *every* in-sync slave, whatever
allAckInSyncStateSet and inSyncReplicas say, and is refused up front (SERVICE_NOT_AVAILABLE,
saying why, nothing stored) when the master is alone in its in-sync set or a member has not
reported within the lease. Why no epoch then has two masters with acknowledged writes:

1. the controller elects a new master only from the in-sync set (unless
   enableElectUncleanMaster), and the master's view of that set is never smaller than the
   controller's: it leaves the set only by the master's own proposal, so the controller's
   answer comes first; a slave being added is waited for from before it is proposed
   (``in_sync_set``), and members of a proposal whose answer never came stay waited for
   (``unsettled``) until a newer set is read;
2. an elected slave stops following its old master (its HA client stopped, so no report, no
   acknowledgement) before it takes a write as the new master (``become_master``);
3. a slave confirms only offsets it holds, and a send is answered only once each member
   waited for confirmed its end.

So a write the old master answers was confirmed by every slave that could have been elected,
each still following it then, which holds the write: the new master has it, and keeps it
below its own epoch's start. After an election the old master's writes wait for a slave that
no longer acknowledges: FLUSH_SLAVE_TIMEOUT, never SEND_OK (and refused before the store once
it has not reported within the lease, as after a freeze: SIGSTOP, a long pause).

Every member, not a quorum: the controller may elect any alive member (the freshest by its
last heartbeats, which may be old), so with inSyncReplicas below the set's size only the whole
set intersects every possible choice. While the lease runs nothing can be elected, and sends
wait as inSyncReplicas or allAckInSyncStateSet say (RocketMQ's rule, which a failover with
inSyncReplicas below the set's size may lose writes under, controller up or not); such a send
confirmed only after the lease ended waits for every member as well (``unless_silenced``).
A master alone in its set has nobody to vouch for it: it refuses writes until the controller
answers, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from broker.store.results import PutMessageStatus

if TYPE_CHECKING:
    from broker.store.ha.master import SlaveProgress

log = logging.getLogger(__name__)

LEASE_SHARE = 2 / 3
PULSE_S = 0.1  # how often the lease notes that the process runs
STALL_S = 0.5  # no pulse for this long: the process itself did not run
REPORTS_SETTLE_S = 0.2  # after a stall: time to read what waited in the sockets
LEASE_ENDED = "controller mode: this master has heard nothing from the controller leader within its lease"


def lease_seconds(heartbeat_timeout_ms: int) -> float:
    return heartbeat_timeout_ms * LEASE_SHARE / 1000


class ControllerLease:
    """Renewed by acknowledged heartbeats; ``on_expired`` runs when it ends unrenewed,
    ``on_renewed`` when an expired lease is renewed again."""

    def __init__(
        self,
        heartbeat_timeout_ms: Callable[[], int],
        on_expired: Callable[[], None],
        on_renewed: Callable[[], None],
    ) -> None:
        self._timeout_ms = heartbeat_timeout_ms
        self._on_expired, self._on_renewed = on_expired, on_renewed
        self.valid_until = 0.0  # time.monotonic(); 0: never granted
        self.expired = True
        # Ended, and no replica info has named this broker master since (``confirm``).
        self.silent = False
        self.reports_from = 0.0  # slaves' reports received before this (monotonic) prove nothing
        self._timer: asyncio.TimerHandle | None = None
        self._pulse_at = 0.0
        self._pulse: asyncio.TimerHandle | None = None

    @property
    def seconds(self) -> float:
        return lease_seconds(self._timeout_ms())

    def renew(self, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` (monotonic) was acknowledged by the leader."""
        until = sent_at + self.seconds
        if until <= self.valid_until:
            return
        self.valid_until = until
        now = time.monotonic()
        if until <= now:
            return  # an answer so late that the lease it grants is already over
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(until - now, self._check)
        if self._pulse is None:
            self._beat_pulse()
        if self.expired:
            self.expired = False
            self._on_renewed()

    def _check(self) -> None:
        self._timer = None
        left = self.valid_until - time.monotonic()
        if left > 0:  # asyncio runs a timer up to its clock resolution early
            self._timer = asyncio.get_running_loop().call_later(left, self._check)
        elif not self.expired:
            self._end()

    def check_now(self) -> None:
        """End the lease now if its time is up. Called before a write is served: a process that
        was frozen (SIGSTOP, a long pause) serves requests that waited in its sockets before the
        loop runs the expiry timer, which is due as well."""
        self._noticed_stall()
        if not self.expired and time.monotonic() >= self.valid_until:
            self._end()

    def _end(self) -> None:
        self._noticed_stall()
        self.expired = self.silent = True
        self._on_expired()

    def _beat_pulse(self) -> None:
        self._noticed_stall()
        self._pulse_at = time.monotonic()
        self._pulse = asyncio.get_running_loop().call_later(PULSE_S, self._beat_pulse)

    def _noticed_stall(self) -> None:
        """After the process did not run (SIGSTOP, a long pause), what waited in its sockets
        meanwhile, slaves' reports among them, is read as if it were new: such reports prove
        nothing (``silence_refusal``)."""
        now = time.monotonic()
        if self._pulse is not None and now - self._pulse_at > STALL_S and now >= self.reports_from:
            self.reports_from = now + REPORTS_SETTLE_S

    def confirm(self) -> bool:
        """The leader named this broker master at its epoch: no longer silent if the lease runs."""
        if not self.expired:
            self.silent = False
        return not self.silent

    def guarded(self, handler, fence: Callable[[], None]):
        """``handler`` (a request that writes to the log) served only after the lease and then
        ``fence`` were checked: the store refuses it if need be. Synchronous, as the handler may be."""
        check = self.check_now

        def guarded(conn, request):
            check()
            fence()
            return handler(conn, request)

        return guarded

    def silent_millis(self) -> int:
        """How long ago the lease ended (0 while it runs)."""
        return max(0, int((time.monotonic() - self.valid_until) * 1000)) if self.expired else 0

    def cancel(self) -> None:
        for timer in (self._timer, self._pulse):
            if timer is not None:
                timer.cancel()
        self._timer = self._pulse = None


def silence_refusal(
    members: frozenset[int], slaves: Iterable[SlaveProgress], lease: ControllerLease, report_interval_ms: int
) -> str:
    """Why a silent master refuses a write now ("" when it may take it): ``members``, the in-sync
    slaves that could have been elected; ``slaves``, the connected ones. Each member must have
    reported within the lease (or two report intervals, haSendHeartbeatInterval, if longer), and
    since this broker last stalled, if it did (``reports_from``)."""
    lease_s = lease.seconds
    why = f"{LEASE_ENDED} ({int(lease_s * 1000)} ms, 2/3 of controllerHeartBeatTimeoutMills)"
    if not members:
        return (
            f"{why} and is alone in its in-sync set: it may have been replaced, so it takes no "
            "writes until the controller answers again"
        )
    window, now = max(lease_s, 2 * report_interval_ms / 1000), time.monotonic()
    since = max(now - window, lease.reports_from)
    fresh = {s.broker_id for s in slaves if s.ack_offset >= 0 and s.last_report_monotonic >= since}
    silent = sorted(members - fresh)
    if silent:
        return (
            f"{why}, and in-sync slave(s) {silent} have not reported within {int(window * 1000)} ms"
            f"{' (since this broker stalled)' if since > now - window else ''}: "
            "one may have been elected master, so it takes no writes until they report (each write "
            "then waits for every in-sync slave) or the controller answers again"
        )
    return ""


async def unless_silenced(
    waiting: Awaitable[PutMessageStatus],
    lease: ControllerLease,
    every_member: Callable[[], PutMessageStatus | Awaitable[PutMessageStatus]],
) -> PutMessageStatus:
    """A send that waits for fewer than every in-sync slave (inSyncReplicas) and was stored while
    the lease ran: answered as they confirm only if the lease still runs then. Ended meanwhile (an
    election may follow, of a slave that lacks it), it waits for ``every_member`` as well."""
    status = await waiting
    lease.check_now()
    if status is PutMessageStatus.PUT_OK and lease.silent:
        again = every_member()
        status = again if isinstance(again, PutMessageStatus) else await again
    return status
