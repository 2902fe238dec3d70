"""Writing a table's file after each change, or once after a batch of changes.

A request that creates many entries at once (a heartbeat naming many new groups, each with its
retry topic) would otherwise write and fsync the topic and group files once per entry, holding
the event loop for seconds; inside ``batch()`` the changes are written once, when it ends.

Changes made on the event loop outside a batch (a send-back or a send creating a group or a
retry topic, each a request of its own) are written once on the loop's next turn: a burst of
concurrent requests shares one write instead of paying one rewrite and fsync each (10-60 ms by
table size). Requests that create one wait for a registration before answering, which takes
longer than that turn, so what they made is on disk when they are acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from broker.common.json_config_file import DataVersion


class PersistBatching:
    def __init__(self, persist: Callable[[], object]) -> None:
        self._persist = persist
        self._depth = 0  # nested batch() blocks open now
        self._dirty = False  # a change made inside them, not written yet
        self._soon: asyncio.Handle | None = None  # the write on the loop's next turn

    def changed(self) -> None:
        """A change was made: written when the outermost open batch ends, else on the running
        event loop's next turn, else (no loop in this thread) now."""
        if self._depth:
            self._dirty = True
            return
        if self._soon is not None:
            return  # the write already due takes this change too
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._persist()
            return
        self._soon = loop.call_soon(self._write_soon)

    def _write_soon(self) -> None:
        self._soon = None
        self._persist()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._dirty:
                self._dirty = False
                self._persist()


def put_or_undo(
    table: dict[str, Any],
    lock: threading.Lock,
    key: str,
    value: Any,
    version: DataVersion,
    persist: Callable[[], bool],
) -> bool:
    """Put ``value`` under ``key`` and write the table's file now. When the file could not be
    written (a full disk), the entry and the data version go back to what they were and False is
    returned: a change the broker refuses must not live on in memory until the next restart (nor
    be registered with the name servers meanwhile)."""
    with lock:
        before = table.get(key)
        version_before = version.timestamp, version.counter
        table[key] = value
        version.next_version()
    if persist():
        return True
    with lock:
        if table.get(key) is value:  # nothing replaced it meanwhile
            if before is None:
                del table[key]
            else:
                table[key] = before
            version.timestamp, version.counter = version_before
    return False
