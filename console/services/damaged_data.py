"""Damaged commit-log data a broker has quarantined, as its runtime info reports it.

Recovery and reads never cut intact data after a damaged record: the damaged byte range is set
aside (quarantined), skipped by reads, and reported in ``GET_BROKER_RUNTIME_INFO`` as
``commitLogDamagedRanges``, ``commitLogDamagedBytes`` and ``commitLogDamagedDetail`` (a JSON
array of at most 20 ranges). The broker page shows them in a banner; an admin purges a range
there, which the broker then passes over like any other reader.

The detail comes from a socket: it is parsed defensively, and a broker that reports figures but
no readable detail still gets its banner (with the counts), never a silent page.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

# The broker bounds its detail list; a reply claiming more is cut here too.
MAX_SHOWN_RANGES = 20


@dataclass(frozen=True)
class DamagedRange:
    start: int  # absolute commit-log offset of the first damaged byte
    end: int  # absolute offset just past the range
    segment: str
    reason: str
    found_at: datetime.datetime | None

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class DamagedData:
    range_count: int
    byte_count: int
    ranges: tuple[DamagedRange, ...]
    # Why the detail could not be read, when the counts say there is damage but the list is unusable.
    detail_error: str = ""

    @property
    def any(self) -> bool:
        return self.range_count > 0

    @property
    def hidden_count(self) -> int:
        """Ranges the broker counts but did not list (it lists at most 20)."""
        return max(0, self.range_count - len(self.ranges))


def _count(runtime: dict[str, str], key: str) -> int:
    text = (runtime.get(key) or "0").strip()
    try:
        return max(0, int(text))
    except ValueError:
        return 0


def _timestamp(value: object) -> datetime.datetime | None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    try:
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _offset(value: object) -> int | None:
    # JSON's true and false are ints to Python; they are no offsets.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _range(entry: object) -> DamagedRange | None:
    if not isinstance(entry, dict):
        return None
    start, end = _offset(entry.get("from")), _offset(entry.get("to"))
    if start is None or end is None or not 0 <= start < end:
        return None
    return DamagedRange(
        start=start,
        end=end,
        segment=str(entry.get("segment") or "")[:64],
        reason=str(entry.get("reason") or "")[:300],
        found_at=_timestamp(entry.get("foundAt")),
    )


def damaged_data(runtime: dict[str, str]) -> DamagedData:
    """What the broker's runtime info says about quarantined commit-log ranges."""
    range_count = _count(runtime, "commitLogDamagedRanges")
    byte_count = _count(runtime, "commitLogDamagedBytes")
    text = runtime.get("commitLogDamagedDetail") or "[]"
    try:
        entries = json.loads(text)
    except ValueError:
        return DamagedData(range_count, byte_count, (), "the broker's list of damaged ranges is not JSON")
    if not isinstance(entries, list):
        return DamagedData(range_count, byte_count, (), "the broker's list of damaged ranges is not a list")
    ranges = tuple(r for r in map(_range, entries[:MAX_SHOWN_RANGES]) if r is not None)
    error = "" if len(ranges) == min(len(entries), MAX_SHOWN_RANGES) else "some listed ranges were unreadable"
    return DamagedData(max(range_count, len(ranges)), byte_count, ranges, error)
