"""How late the broker's event loop runs what is due: its answer to RocketMQ's queue wait times.

RocketMQ's broker hands each request to a thread pool by kind (send, pull, query) and reports how
long the request at the head of each pool's queue has waited (``sendThreadPoolQueueHeadWaitTimeMills``
and its siblings), the figure operators watch to see a broker falling behind. Here every request
is served by one event loop, and a request waits — in its socket, or in a connection's backlog —
exactly as long as the loop is behind. A timer due every ``interval_s`` measures that: how much
later than due it ran is how long a request arriving then waited before the loop came to it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

DEFAULT_INTERVAL_S = 0.1
# The peak is kept over this long: a request that held the loop shows in the runtime info for a
# minute, whenever an operator (or a test) looks, not only until the next tick 100 ms later.
PEAK_WINDOW_S = 60.0


class LoopLagMonitor:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("the loop-lag interval must be positive")
        self.loop, self.interval_s, self.clock = loop, interval_s, clock
        self.lag_ms = 0  # at the last tick
        # (tick time, lag) of the late ticks of the last PEAK_WINDOW_S: at most one per tick.
        self._late: deque[tuple[float, int]] = deque(maxlen=int(PEAK_WINDOW_S / interval_s) + 1)
        self._due = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        self._due = self.clock() + self.interval_s
        self._timer = self.loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        # Whole milliseconds, as RocketMQ reports them; the loop's timers are only
        # millisecond-exact, so a lateness under one is not a lag.
        now = self.clock()
        self.lag_ms = max(0, int((now - self._due) * 1000))
        if self.lag_ms:
            self._late.append((now, self.lag_ms))
        self._schedule()

    def peak_ms(self) -> int:
        """The longest lag of a tick in the last PEAK_WINDOW_S (0 when none was late)."""
        since = self.clock() - PEAK_WINDOW_S
        return max((lag for at, lag in self._late if at >= since), default=0)
