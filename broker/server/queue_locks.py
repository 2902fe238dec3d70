"""Queue locks for orderly consumers (RocketMQ's RebalanceLockManager).

Per consumer group, each queue may be locked by one client id. A lock lives
``lock_max_live_ms`` (60 s by default) from its last renewal; clients renew theirs every 20 s,
so a crashed client's queues become lockable by others a minute later. Locking a queue the
same client already holds renews it; an expired lock is taken over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

QueueKey = tuple[str, str, int]  # topic, broker name, queue id


@dataclass
class LockEntry:
    client_id: str
    last_update_ms: float


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = 60_000, clock: Callable[[], float] | None = None) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        self.clock = clock or (lambda: time.monotonic() * 1000)
        self._table: dict[str, dict[QueueKey, LockEntry]] = {}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: float) -> bool:
        return now - entry.last_update_ms > self.lock_max_live_ms

    def try_lock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> list[QueueKey]:
        """Lock (or renew) what is free, expired or already ours; return the queues now held."""
        now, held = self.clock(), []
        with self._lock:
            table = self._table.setdefault(group, {})
            for key in queues:
                entry = table.get(key)
                if entry is None or entry.client_id == client_id or self._expired(entry, now):
                    table[key] = LockEntry(client_id, now)
                    held.append(key)
        return held

    def unlock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        """Release the queues ``client_id`` holds; locks of other clients stay."""
        with self._lock:
            table = self._table.get(group, {})
            for key in queues:
                entry = table.get(key)
                if entry is not None and entry.client_id == client_id:
                    del table[key]
            if not table:
                self._table.pop(group, None)

    def is_locked(self, group: str, key: QueueKey, client_id: str) -> bool:
        return self.holder(group, key) == client_id

    def holder(self, group: str, key: QueueKey) -> str | None:
        """The client id holding a live lock on ``key``, if any (for admin views and tests)."""
        with self._lock:
            entry = self._table.get(group, {}).get(key)
            return None if entry is None or self._expired(entry, self.clock()) else entry.client_id
