"""A server's guards on its connections: the idle sweep and the refusal of connections over the cap
(the limits themselves are in limits.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from .connection import RemotingConnection

log = logging.getLogger(__name__)

# The sweep runs a few times per idle period (a connection goes between idle_s and
# idle_s + idle_s/4 after its last read), at most every 5 s and at least every 0.1 s.
SWEEPS_PER_IDLE_PERIOD = 4
MAX_SWEEP_INTERVAL_S = 5.0
MIN_SWEEP_INTERVAL_S = 0.1
REFUSAL_LOG_INTERVAL_S = 10.0  # refusals over the cap are logged at most this often


class IdleSweep:
    """Close connections that sent nothing for ``idle_s`` and have nothing in flight
    (RocketMQ's serverChannelMaxIdleTimeSeconds). One timer for the whole server; a connection
    reads no clock: the sweep compares its read counter with the one it saw last time."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        idle_s: float,
        connections: Callable[[], Iterable[RemotingConnection]],
    ) -> None:
        self.loop, self.idle_s, self.connections = loop, idle_s, connections
        interval = idle_s / SWEEPS_PER_IDLE_PERIOD
        self.interval_s = min(max(interval, MIN_SWEEP_INTERVAL_S), MAX_SWEEP_INTERVAL_S)
        self._seen: dict[RemotingConnection, tuple[int, float]] = {}  # reads counted, when they changed
        self._timer: asyncio.TimerHandle | None = loop.call_later(self.interval_s, self._sweep)

    def _sweep(self) -> None:
        now = self.loop.time()
        seen, still_open = self._seen, {}
        for connection in list(self.connections()):
            reads = connection.reads
            last = seen.get(connection)
            if last is None or last[0] != reads or connection.is_waiting():
                still_open[connection] = (reads, now)
            elif now - last[1] >= self.idle_s:
                log.info(
                    "closing the connection from %s: idle for %.0f s (serverChannelMaxIdleTimeSeconds=%g)",
                    connection.remote_addr,
                    now - last[1],
                    self.idle_s,
                )
                connection.close()
            else:
                still_open[connection] = last
        self._seen = still_open
        self._timer = self.loop.call_later(self.interval_s, self._sweep)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._seen = {}


class ConnectionCap:
    """Connections beyond ``max_connections`` are closed at once; the log says so (a flood of
    them is summed up, not logged one line each)."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self.refused = 0  # since the server started
        self._unlogged = 0
        self._logged_at: float | None = None

    def refusal(self, open_connections: int) -> asyncio.Protocol:
        """The protocol of a connection over the cap: it closes its transport as soon as it has one."""
        self.refused += 1
        self._unlogged += 1
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._logged_at is None or now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
            log.warning(
                "refused %d new connection(s): %d open, the cap is %d (serverMaxConnections)",
                self._unlogged,
                open_connections,
                self.max_connections,
            )
            self._unlogged, self._logged_at = 0, now
        return _Refused()


class _Refused(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        transport.close()
