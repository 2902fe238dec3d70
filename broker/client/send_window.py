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
and then fails with ``RemotingTooMuchRequestError`` without having been sent:

- the blocking API waits in the calling thread (``enter_blocking``), as RocketMQ's
  ``tryAcquire`` does: the caller slows to the broker's pace;
- the asyncio API cannot block its caller (``send_async`` returns a future at once), so the send
  is queued (``enter_later``) and started by whichever send leaves first, in arrival order.

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
        # Counts change under the plain lock (cheap on every send); blocked threads wait on a
        # condition over the same lock.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._blocked = 0  # threads waiting in enter_blocking
        self._queued: collections.deque[_Queued] = collections.deque()  # asyncio senders, in order
        self._expiry: asyncio.TimerHandle | None = None

    def _fits(self, size: int) -> bool:
        if self.messages == 0:
            return True
        return self.messages < self.max_messages and self.bytes + size <= self.max_bytes

    def _take(self, size: int) -> None:
        self.messages += 1
        self.bytes += size

    def try_enter(self, size: int) -> bool:
        """Enter now if the send fits and nobody queued before it; else False."""
        with self._lock:
            if self._queued or not self._fits(size):
                return False
            self._take(size)
            return True

    def enter_blocking(self, size: int, timeout_s: float) -> None:
        """Enter, waiting in this thread up to ``timeout_s`` for room."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._queued or not self._fits(size):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._too_many(timeout_s)
                self._blocked += 1
                try:
                    self._changed.wait(remaining)
                finally:
                    self._blocked -= 1
            self._take(size)

    def enter_later(self, size: int, timeout_s: float, start: Callable[[], None], fail: Callable) -> None:
        """On the producer's loop: call ``start()`` once the send has entered, or
        ``fail(error)`` if ``timeout_s`` passes first."""
        with self._lock:
            if not self._queued and self._fits(size):
                self._take(size)
                admitted = True
            else:
                self._queued.append(_Queued(size, timeout_s, start, fail))
                admitted = False
        if admitted:
            start()
        else:
            self._arm_expiry()

    def leave(self, size: int) -> None:
        """A send that entered is settled (called on the producer's loop)."""
        with self._lock:
            self.messages -= 1
            self.bytes -= size
            if self._blocked:
                self._changed.notify_all()
        if self._queued:
            self._start_queued()

    def fail_queued(self, error: Exception) -> None:
        """On the producer's loop: the producer stops; sends still waiting for room fail."""
        with self._lock:
            waiting, self._queued = list(self._queued), collections.deque()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for waiter in waiting:
            waiter.fail(error)

    @property
    def queued(self) -> int:
        return len(self._queued)

    def _start_queued(self) -> None:
        started = []
        with self._lock:
            while self._queued and self._fits(self._queued[0].size):
                waiter = self._queued.popleft()
                self._take(waiter.size)
                started.append(waiter)
        for waiter in started:  # outside the lock: a start may settle at once and leave again
            waiter.start()

    def _arm_expiry(self) -> None:
        """One timer, for the earliest deadline among the queued sends."""
        if self._expiry is not None or not self._queued:
            return
        loop = asyncio.get_running_loop()
        earliest = min(waiter.deadline for waiter in self._queued)
        delay = max(0.0, earliest - time.monotonic())
        self._expiry = loop.call_later(delay, self._expire)

    def _expire(self) -> None:
        self._expiry = None
        now = time.monotonic()
        with self._lock:
            expired = [waiter for waiter in self._queued if waiter.deadline <= now]
            for waiter in expired:
                self._queued.remove(waiter)
        for waiter in expired:
            waiter.fail(self._too_many(waiter.timeout_s))
        self._start_queued()  # a large send that expired may have held back smaller ones
        self._arm_expiry()

    def _too_many(self, timeout_s: float) -> RemotingTooMuchRequestError:
        return RemotingTooMuchRequestError(
            f"no room for the async send within {int(timeout_s * 1000)} ms: {self.messages} sends "
            f"({self.bytes} bytes) in flight, at most {self.max_messages} ({self.max_bytes} bytes)"
        )
