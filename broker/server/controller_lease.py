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

A master whose lease ended refuses writes (SERVICE_NOT_AVAILABLE, with the reason below) until a
heartbeat is acknowledged again *and* the leader's replica info names it master at its epoch
still (an acknowledgement alone does not say that nobody else was elected meanwhile): the
controllers' epochs remain the authority on who is master.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

LEASE_SHARE = 2 / 3


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
        self._timer: asyncio.TimerHandle | None = None

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
        if self.expired:
            self.expired = False
            self._on_renewed()

    def _check(self) -> None:
        self._timer = None
        left = self.valid_until - time.monotonic()
        if left > 0:  # asyncio runs a timer up to its clock resolution early
            self._timer = asyncio.get_running_loop().call_later(left, self._check)
        elif not self.expired:
            self.expired = True
            self._on_expired()

    def check_now(self) -> None:
        """End the lease now if its time is up. Called before a write is served: a process that
        was frozen (SIGSTOP, a long pause) serves requests that waited in its sockets before the
        loop runs the expiry timer, which is due as well."""
        if not self.expired and time.monotonic() >= self.valid_until:
            self.expired = True
            self._on_expired()

    def silent_millis(self) -> int:
        """How long ago the lease ended (0 while it runs)."""
        return max(0, int((time.monotonic() - self.valid_until) * 1000)) if self.expired else 0

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
