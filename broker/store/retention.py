"""Which commit-log segments may go: RocketMQ's CleanCommitLogService rules.

A sealed segment older than ``fileReservedTime`` hours is deleted at the ``deleteWhen`` hour;
when the disk is fuller than ``diskMaxUsedSpaceRatio`` the oldest segments go at once, whatever
their age (only the expired ones, without waiting for the hour, when ``cleanFileForciblyEnable``
is false). The segment being written is never deleted, and deletion always starts from the
oldest so the log never has a hole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from broker.common.conf_file import parse_hours


@dataclass(frozen=True)
class SegmentInfo:
    path: str
    start_offset: int
    size: int
    last_modified_ms: int
    is_current: bool


class RetentionPolicy:
    def __init__(
        self,
        file_reserved_time_hours: float,
        delete_when: str,
        disk_max_used_space_ratio: float,
        clock: Callable[[], float] = time.time,
        max_per_run: int = 10,
        clean_forcibly: bool = True,
    ) -> None:
        self.reserved_ms = int(file_reserved_time_hours * 3_600_000)
        try:
            self.delete_hours = parse_hours(delete_when)
        except ValueError as exc:
            raise ValueError(f"deleteWhen={delete_when!r}: {exc}") from None
        self.disk_ratio = disk_max_used_space_ratio
        self.clock = clock
        self.max_per_run = max_per_run
        self.clean_forcibly = clean_forcibly

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def is_delete_time(self, now_ms: int) -> bool:
        return datetime.fromtimestamp(now_ms / 1000).hour in self.delete_hours

    def select_expired(
        self, segments: list[SegmentInfo], now_ms: int, disk_used_ratio: float
    ) -> list[SegmentInfo]:
        disk_full = disk_used_ratio > self.disk_ratio
        if not disk_full and not self.is_delete_time(now_ms):
            return []
        forced = disk_full and self.clean_forcibly
        chosen: list[SegmentInfo] = []
        for segment in sorted(segments, key=lambda s: s.start_offset):
            if segment.is_current or len(chosen) >= self.max_per_run:
                break
            expired = now_ms - segment.last_modified_ms >= self.reserved_ms
            if not (expired or forced):
                break  # keep the log contiguous: nothing newer goes before this one
            chosen.append(segment)
        return chosen
