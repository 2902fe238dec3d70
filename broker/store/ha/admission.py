"""Places on a master's HA port (issue 31: a stranger without the secret kept the real slave
out by holding idle connections).

A connection is *pending* from accept until it has opened (signed in where the port asks for it,
sent the controller-mode handshake or its first report); only then does it take one of the
slaves' ``MAX_CONNECTIONS`` places. Pending connections have a bounded pool of their own: when it
is full the oldest is closed to make room, and each has ``OPENING_DEADLINE`` seconds from accept
to open. A flood of idle connections therefore turns over, and a real slave, which opens within
milliseconds of connecting, gets through it.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

log = logging.getLogger(__name__)

# Seconds from accept for a connection to open, whatever haHousekeepingInterval says: a slave
# opens within milliseconds; a stranger must not hold a pending place for long.
OPENING_DEADLINE = 3.0
# Connections opening at once; more close the oldest.
MAX_PENDING = 32
_WARN_EVERY = 10.0  # seconds between two warnings about closed pending connections


class Closable(Protocol):
    address: str

    def close(self) -> None: ...


class PendingPool:
    """Connections that have not opened yet, oldest first."""

    def __init__(self, limit: int = MAX_PENDING) -> None:
        self.limit = limit
        self._pending: dict[Closable, None] = {}  # insertion order: oldest first
        self._evicted = 0
        self._warned = 0.0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, connection: Closable) -> None:
        """Take ``connection``; when the pool is full, close the oldest to make room."""
        while len(self._pending) >= self.limit:
            oldest = next(iter(self._pending))
            del self._pending[oldest]
            oldest.close()
            self._evicted += 1
        self._pending[connection] = None
        now = time.monotonic()
        if self._evicted and now - self._warned >= _WARN_EVERY:
            log.warning(
                "HA port: %d connections that had not signed in or opened closed to make room "
                "(at most %d wait at once)", self._evicted, self.limit,
            )  # fmt: skip
            self._evicted, self._warned = 0, now

    def discard(self, connection: Closable) -> None:
        self._pending.pop(connection, None)

    def all(self) -> list[Closable]:
        return list(self._pending)
