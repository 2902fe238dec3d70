"""When the disk is too full to write: RocketMQ's disk-full rule, plus what a failed allocation says.

The store is marked DISK_FULL (puts refused with SERVICE_NOT_AVAILABLE, reads go on) when

- the commit log's or the consume queues' disk is more than ``diskSpaceWarningLevelRatio``
  percent used (RocketMQ's rule and default, 90; it allows 35 to 90), measured as ``df``'s Use%
  every second by the clean service, at start, and right after a commit-log segment could not be
  allocated; or
- a commit-log segment could not be allocated (``SegmentAllocationError``: the disk has fewer
  free bytes than the segment): until that many bytes are free again.

It is cleared at the first check where neither holds, so the broker takes writes again by
itself once space returns (retention freed segments, or an operator freed the disk). The check
runs on the clean service's thread; a put only reads a flag.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable

from .disk import existing_path, human_bytes
from .mapped_file import SegmentAllocationError
from .running_flags import DISK_FULL, RunningFlags
from .store_config import MessageStoreConfig

# How often the clean service measures the disk (RocketMQ measures at each 10-s clean-up; a
# producer can fill a small disk faster than that, and a measure costs two statvfs calls).
DISK_CHECK_INTERVAL_S = 1.0
# RocketMQ's bounds of the warning level (getDiskSpaceWarningLevelRatio clamps to them).
WARNING_LEVEL_RANGE = (35, 90)

_LABELS = {"CL": "commit log", "CQ": "consume queue", "INDEX": "index"}


class DiskGuard:
    def __init__(
        self, config: MessageStoreConfig, flags: RunningFlags, paths: Callable[[], dict[str, str]]
    ) -> None:
        # Read at each check: diskSpaceWarningLevelRatio changes on a running broker.
        self.config = config
        self.flags = flags
        self._paths = paths  # "CL", "CQ", "INDEX" -> the directory of each
        # The newest measure of each disk: used fraction (-1 when it cannot be measured) and free
        # bytes; what refusals quote, so a refused put never waits on statvfs.
        self.used: dict[str, float] = dict.fromkeys(_LABELS, 0.0)
        self.free: dict[str, int] = dict.fromkeys(_LABELS, 0)
        # The largest commit-log segment that could not be allocated since the disk was last
        # fine, and the directory it was for.
        self._needed = 0
        self._needed_in = "CL"
        # The clean service's check and a put's failed allocation may run at once: neither
        # must clear what the other has just found.
        self._lock = threading.Lock()

    @property
    def warning_level(self) -> int:
        low, high = WARNING_LEVEL_RANGE
        return min(high, max(low, self.config.disk_space_warning_level_ratio))

    def measure(self) -> None:
        for name, path in self._paths().items():
            try:
                usage = shutil.disk_usage(existing_path(path))
            except OSError:
                self.used[name], self.free[name] = -1.0, 0
                continue
            usable = usage.used + usage.free
            self.used[name] = usage.used / usable if usable else 0.0
            self.free[name] = usage.free

    def check(self) -> bool:
        """Measure and set or clear DISK_FULL; returns whether the disk is full."""
        with self._lock:
            self.measure()
            reason = self._full_reason()
            if reason:
                self.flags.set(DISK_FULL, reason)
                return True
            self._needed = 0
            self.flags.clear(DISK_FULL)
            return False

    def allocation_failed(self, error: SegmentAllocationError, name: str = "CL") -> None:
        """A commit-log segment could not be allocated: refuse writes until it could be."""
        with self._lock:
            if error.size > self._needed:
                self._needed, self._needed_in = error.size, name
            self.measure()
            self.flags.set(DISK_FULL, self._full_reason() or str(error))

    def _full_reason(self) -> str | None:
        level = self.warning_level
        for name in ("CL", "CQ"):
            used = self.used[name]
            if used * 100 > level:
                return (
                    f"the {_LABELS[name]} disk is {used:.1%} used, above diskSpaceWarningLevelRatio {level}%"
                )
        free = self.free[self._needed_in]
        if self._needed and free < self._needed:
            return (
                f"a {human_bytes(self._needed)} {_LABELS[self._needed_in]} segment cannot be "
                f"allocated: {human_bytes(free)} free"
            )
        return None

    def util_text(self) -> str:
        """The disk figures RocketMQ quotes in its refusal: ``CL:  0.93 CQ:  0.93 INDEX:  0.93``."""
        used = self.used
        return f"CL: {used['CL']:5.2f} CQ: {used['CQ']:5.2f} INDEX: {used['INDEX']:5.2f}"
