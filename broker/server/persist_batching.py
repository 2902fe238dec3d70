"""Writing a table's file after each change, or once after a batch of changes.

A request that creates many entries at once (a heartbeat naming many new groups, each with its
retry topic) would otherwise write and fsync the topic and group files once per entry, holding
the event loop for seconds; inside ``batch()`` the changes are written once, when it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class PersistBatching:
    def __init__(self, persist: Callable[[], None]) -> None:
        self._persist = persist
        self._depth = 0  # nested batch() blocks open now
        self._dirty = False  # a change made inside them, not written yet

    def changed(self) -> None:
        """A change was made: written now, or when the outermost open batch ends."""
        if self._depth:
            self._dirty = True
        else:
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
