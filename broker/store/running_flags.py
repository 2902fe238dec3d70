"""Why the store refuses writes: RocketMQ's RunningFlags, one bit per cause.

Reads are never refused here. A put is refused (SERVICE_NOT_AVAILABLE) while any write bit is
set; each bit is set and cleared by the part of the store that knows its cause (the disk check,
the dispatch of consume-queue entries and index keys), so one cause clearing never hides another.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# RocketMQ's bit values (RunningFlags.java), as its "not writeable" log line prints the word.
NOT_WRITEABLE = 1 << 1
WRITE_LOGICS_QUEUE_ERROR = 1 << 2
WRITE_INDEX_FILE_ERROR = 1 << 3
DISK_FULL = 1 << 4

_WRITE_BITS = NOT_WRITEABLE | WRITE_LOGICS_QUEUE_ERROR | WRITE_INDEX_FILE_ERROR | DISK_FULL
_NAMES = {
    NOT_WRITEABLE: "NOT_WRITEABLE",
    WRITE_LOGICS_QUEUE_ERROR: "WRITE_LOGICS_QUEUE_ERROR",
    WRITE_INDEX_FILE_ERROR: "WRITE_INDEX_FILE_ERROR",
    DISK_FULL: "DISK_FULL",
}


class RunningFlags:
    """The bits and, for each, the sentence that says why writes are refused."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self.bits = 0
        self._reasons: dict[int, str] = {}
        self._levels: dict[int, int] = {}
        self._lock = threading.Lock()
        # Told after every change, so the store can keep its one put-time flag current.
        self.on_change = on_change

    @property
    def writeable(self) -> bool:
        return not self.bits & _WRITE_BITS

    def is_set(self, bit: int) -> bool:
        return bool(self.bits & bit)

    def set(self, bit: int, reason: str, level: int = logging.ERROR) -> None:
        """``level``: how loud the change is logged (a controller-mode broker waiting for its
        role refuses writes by design, a full disk does not)."""
        with self._lock:
            newly = not self.bits & bit
            self.bits |= bit
            self._reasons[bit] = reason
            self._levels[bit] = level
        if newly:
            log.log(level, "the store refuses writes (%s): %s", _NAMES[bit], reason)
            self._changed()

    def clear(self, bit: int) -> None:
        with self._lock:
            was = bool(self.bits & bit)
            self.bits &= ~bit
            self._reasons.pop(bit, None)
            level = min(self._levels.pop(bit, logging.WARNING), logging.WARNING)
        if was:
            log.log(level, "the store no longer refuses writes for %s", _NAMES[bit])
            self._changed()

    def only(self, bit: int) -> bool:
        """Whether ``bit`` is the one write bit set."""
        return self.bits & _WRITE_BITS == bit

    def reason(self) -> str:
        """Why writes are refused ("" when they are not), causes in bit order."""
        reasons = self._reasons.copy()
        return "; ".join(reasons[bit] for bit in sorted(reasons))

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
