"""A server's guards on its connections: the idle sweep, the refusal of connections over the caps,
in all and per client address, and the process's descriptor limit raised to hold the cap (the
limits themselves are in broker/common/connection_limits.py)."""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import Counter
from collections.abc import Callable, Iterable

from broker.common.connection_limits import MAX_CONNECTIONS_KEY

from .connection import RemotingConnection

log = logging.getLogger(__name__)

# The sweep runs a few times per idle period (a connection goes between idle_s and
# idle_s + idle_s/4 after its last read), at most every 5 s and at least every 0.1 s.
SWEEPS_PER_IDLE_PERIOD = 4
MAX_SWEEP_INTERVAL_S = 5.0
MIN_SWEEP_INTERVAL_S = 0.1
REFUSAL_LOG_INTERVAL_S = 10.0  # refusals over the cap are logged at most this often
# Descriptors kept beyond the connections: store files, the name-server and broker-to-broker
# connections, logs.
SPARE_DESCRIPTORS = 512


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
    """Connections beyond ``max_connections``, or beyond ``per_address`` from one client address,
    are closed at once; the log says so (a flood of them is summed up, not logged one line each)."""

    def __init__(self, max_connections: int, per_address: int | None = None) -> None:
        self.max_connections = max_connections
        self.per_address = max_connections if per_address is None else per_address
        self.by_address: Counter[str] = Counter()  # admitted connections open, by peer address
        self.refused = 0  # since the server started, over either cap
        self._unlogged = {"total": 0, "address": 0}
        self._logged_at: dict[str, float] = {}

    def refusal(self, open_connections: int) -> asyncio.Protocol:
        """The protocol of a connection over the cap: it closes its transport as soon as it has one."""
        if self._count("total"):
            log.warning(
                "refused %d new connection(s): %d open, the cap is %d (serverMaxConnections)",
                self._take_unlogged("total"),
                open_connections,
                self.max_connections,
            )
        return _Refused()

    def admit(self, host: str | None, open_connections: int) -> bool:
        """Whether a connection from ``host`` (accepted, under the total cap) may stay; counted if so."""
        if host is None:  # no peer address (a test's socket pair): only the total cap applies
            return True
        if self.by_address[host] < self.per_address:
            self.by_address[host] += 1
            return True
        if self._count("address"):
            log.warning(
                "refused %d new connection(s), the last from %s: %d open, the cap is %d per address "
                "(serverMaxConnectionsPerAddress)",
                self._take_unlogged("address"),
                host,
                open_connections,
                self.per_address,
            )
        return False

    def release(self, host: str | None) -> None:
        """An admitted connection from ``host`` closed."""
        if host is None or host not in self.by_address:
            return
        self.by_address[host] -= 1
        if self.by_address[host] <= 0:
            del self.by_address[host]  # the table holds only addresses with connections open

    def _count(self, cap: str) -> bool:
        """Count one refusal over ``cap``; whether it is time to log (at most every 10 s per cap)."""
        self.refused += 1
        self._unlogged[cap] += 1
        now = asyncio.get_running_loop().time()
        last = self._logged_at.get(cap)
        if last is not None and now - last < REFUSAL_LOG_INTERVAL_S:
            return False
        self._logged_at[cap] = now
        return True

    def _take_unlogged(self, cap: str) -> int:
        unlogged, self._unlogged[cap] = self._unlogged[cap], 0
        return unlogged


class _Refused(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        transport.close()


def ensure_descriptors(connections: int) -> None:
    """Raise the process's soft descriptor limit (as far as its hard limit allows) to hold
    ``connections`` plus spare ones; say so in the log when it cannot."""
    wanted = connections + SPARE_DESCRIPTORS
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            new_soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
            soft = new_soft
    except (OSError, ValueError) as exc:
        log.warning("cannot raise the open-files limit to %d: %s", wanted, exc)
        return
    if soft < wanted:
        log.warning(
            "the open-files limit (%d) is below %s=%d plus %d spare: connections may fail to be "
            "accepted before the cap refuses them",
            soft,
            MAX_CONNECTIONS_KEY,
            connections,
            SPARE_DESCRIPTORS,
        )
