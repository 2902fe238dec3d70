"""How many asynchronous sends of a producer may be in flight at once, in messages and in bytes.

An async send holds its message until the broker answers. A caller that starts sends faster than
the broker answers them (a loop of ``send_async`` while a broker is slow, or holds the
connection back — see the README's "Flow control") would otherwise pile up every message in
memory until the send timeouts fire. RocketMQ's client bounds the same thing twice: its remoting
layer lets 65,535 async requests be in flight, and its producer can hold async sends to a count
and a byte total (``backPressureForAsyncSendNum`` / ``backPressureForAsyncSendSize``). Here one
window does it, always on.

A send enters the window before it starts and leaves it once it is settled (answered, failed or
timed out). One that does not fit waits for others to leave, at most until its own send timeout,
and then fails with ``RemotingTooMuchRequestError`` without having been sent. The window's
counts belong to the producer's loop: sends enter (``try_enter``, or ``enter_later`` which queues
them in arrival order) and leave there, so the path every send takes needs no lock. The blocking
API's ``send_async`` also waits in the calling thread while the window is full (``reserve``), as
RocketMQ's ``tryAcquire`` does, so that the caller slows to the broker's pace instead of running
ahead of the loop; what threads reserved counts until the loop takes it over (``arrived``).

A message larger than the whole byte budget is let in when nothing else is in flight, so that it
is sent alone rather than never.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable

from broker.remoting.errors import RemotingTooMuchRequestError

# RocketMQ's client lets 65,535 async requests be in flight (clientAsyncSemaphoreValue) and its
# producer's async back pressure defaults to 100 MiB.
DEFAULT_MAX_MESSAGES = 65_535
DEFAULT_MAX_BYTES = 100 * 1024 * 1024


class _Queued:
    __slots__ = ("deadline", "fail", "size", "start", "timeout_s")

    def __init__(self, size: int, timeout_s: float, start: Callable[[], None], fail: Callable) -> None:
        self.size, self.timeout_s, self.start, self.fail = size, timeout_s, start, fail
        self.deadline = time.monotonic() + timeout_s


class SendWindow:
    def __init__(self, max_messages: int = DEFAULT_MAX_MESSAGES, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("an async send window must admit at least one message and one byte")
        self.max_messages, self.max_bytes = max_messages, max_bytes
        self.messages = 0  # in flight now
        self.bytes = 0
        self._queued: collections.deque[_Queued] = collections.deque()  # in arrival order
        self._expiry: asyncio.TimerHandle | None = None
        self._room = threading.Condition()  # threads in reserve wait on it; guards the next two
        self._reserved = 0  # sends threads reserved room for that have not reached the loop yet
        self._reserved_bytes = 0
        self._blocked = 0  # threads waiting in reserve

    def _fits(self, size: int, messages: int, used_bytes: int) -> bool:
        return messages == 0 or (messages < self.max_messages and used_bytes + size <= self.max_bytes)

    # -- on the producer's loop ----------------------------------------------------------------
    def try_enter(self, size: int) -> bool:
        """Enter now if the send fits and nobody queued before it; else False."""
        if self._queued or not self._fits(size, self.messages, self.bytes):
            return False
        self.messages += 1
        self.bytes += size
        return True

    def enter_later(self, size: int, timeout_s: float, start: Callable[[], None], fail: Callable) -> None:
        """Call ``start()`` once the send has entered (at once if it fits now), or
        ``fail(error)`` if ``timeout_s`` passes first."""
        if self.try_enter(size):
            start()
            return
        self._queued.append(_Queued(size, timeout_s, start, fail))
        self._arm_expiry()

    def leave(self, size: int) -> None:
        """A send that entered is settled."""
        self.messages -= 1
        self.bytes -= size
        if self._queued:
            self._start_queued()
        self._wake_blocked()

    def arrived(self, size: int) -> None:
        """A send a thread reserved room for reached the loop (which now counts it, or queues it)."""
        with self._room:
            self._reserved -= 1
            self._reserved_bytes -= size

    def fail_queued(self, error: Exception) -> None:
        """The producer stops: sends still waiting for room fail."""
        waiting, self._queued = list(self._queued), collections.deque()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for waiter in waiting:
            waiter.fail(error)
        self._wake_blocked()

    @property
    def queued(self) -> int:
        return len(self._queued)

    def _start_queued(self) -> None:
        queued = self._queued
        while queued and self._fits(queued[0].size, self.messages, self.bytes):
            waiter = queued.popleft()
            self.messages += 1
            self.bytes += waiter.size
            waiter.start()

    def _arm_expiry(self) -> None:
        """One timer, for the earliest deadline among the queued sends."""
        if self._expiry is not None or not self._queued:
            return
        earliest = min(waiter.deadline for waiter in self._queued)
        delay = max(0.0, earliest - time.monotonic())
        self._expiry = asyncio.get_running_loop().call_later(delay, self._expire)

    def _expire(self) -> None:
        self._expiry = None
        now = time.monotonic()
        expired = [waiter for waiter in self._queued if waiter.deadline <= now]
        for waiter in expired:
            self._queued.remove(waiter)
            waiter.fail(self._too_many(waiter.timeout_s))
        self._start_queued()  # a large send that expired may have held back smaller ones
        self._arm_expiry()
        self._wake_blocked()  # threads wait while anything is queued

    def _wake_blocked(self) -> None:
        """After the counts or the queue changed: threads waiting in ``reserve`` look again."""
        if self._blocked:  # read after the change: see reserve
            with self._room:
                self._room.notify_all()

    # -- in any other thread -------------------------------------------------------------------
    def reserve(self, size: int, timeout_s: float) -> float:
        """Wait until the window, with what other threads reserved, has room; reserve it until
        the send reaches the loop (``arrived``). Returns what is left of ``timeout_s``, for the
        loop's ``enter_later``: the counts are read as the loop leaves them, and the loop still
        decides (a send may find the room taken there by then and queue).

        No wake-up is lost: this thread counts itself in ``_blocked`` before it reads the counts
        and holds ``_room`` until it waits; the loop changes the counts before it reads
        ``_blocked``, and notifies under ``_room``."""
        deadline = time.monotonic() + timeout_s
        with self._room:
            self._blocked += 1
            try:
                while self._queued or not self._fits(
                    size, self.messages + self._reserved, self.bytes + self._reserved_bytes
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._too_many(timeout_s)
                    self._room.wait(remaining)
            finally:
                self._blocked -= 1
            self._reserved += 1
            self._reserved_bytes += size
        return max(deadline - time.monotonic(), 0.0)

    def _too_many(self, timeout_s: float) -> RemotingTooMuchRequestError:
        return RemotingTooMuchRequestError(
            f"no room for the async send within {int(timeout_s * 1000)} ms: {self.messages} sends "
            f"({self.bytes} bytes) in flight, at most {self.max_messages} ({self.max_bytes} bytes)"
        )
