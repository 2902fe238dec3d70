"""A topic queue's index into the commit log: 20-byte entries, logical offset N at byte N*20.

Entry = commit-log offset (8) | message size (4) | tag hash code (8). Consumers address
messages by logical offset; the entry tells where the record lives.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path

from broker.common.names import name_path

from .mapped_file import MappedFileQueue

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20
# A blank entry's size (RocketMQ's Integer.MAX_VALUE): no record is ever that long.
BLANK_ENTRY_SIZE = 0x7FFFFFFF
# More missing offsets than this is no damage but a fault: the put is refused as before.
MAX_GAP_ENTRIES = 10_000

log = logging.getLogger(__name__)


class ConsumeQueue:
    # Blocks reserved ahead of the write position, not a whole file at once: a broker holds a
    # queue per topic and queue id, most near-empty (a retry or DLQ topic per group), and whole
    # files took 6 MB each (attack finding 2: 13 GB for 2,163 one-message topics). 64 KiB is
    # 3,276 entries: one fallocate per that many messages.
    RESERVE_CHUNK = 64 * 1024

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int) -> None:
        self.topic = topic
        self.topic_bytes = topic.encode()  # what a read compares with the record's stored topic
        self.queue_id = queue_id
        # Segments must hold a whole number of entries.
        self.file_size = file_size - file_size % ENTRY_SIZE
        # name_path refuses a name that could leave ``root`` (issue 21: ``../../tmp/x``).
        self.files = MappedFileQueue(
            name_path(root, topic) / str(queue_id), self.file_size, reserve_chunk=self.RESERVE_CHUNK
        )
        self.min_logic_offset = 0  # byte position of the first live entry
        self.max_physic_offset = 0  # commit-log end of the last entry

    # -- recovery -----------------------------------------------------------------------------
    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the last valid entry: each file is scanned up to its first empty slot."""
        files = self.files.files
        for index, mapped in enumerate(files):
            end = self._valid_entries_end(mapped)
            mapped.wrote_position = mapped.flushed_position = end
            if end < self.file_size:
                for stale in files[index + 1 :]:
                    stale.destroy()
                del files[index + 1 :]
                break
        self._refresh_max_physic()
        if files:
            self.min_logic_offset = files[0].file_from_offset

    def _valid_entries_end(self, mapped) -> int:
        view = mapped.view
        lo, hi = 0, mapped.reserved // ENTRY_SIZE  # a hole behind it holds no entry
        # Entries are written densely, so "non-empty" is monotone: binary search the boundary.
        while lo < hi:
            mid = (lo + hi) // 2
            offset, size, _ = ENTRY.unpack_from(view, mid * ENTRY_SIZE)
            if size > 0 and offset >= 0:
                lo = mid + 1
            else:
                hi = mid
        return lo * ENTRY_SIZE

    def _refresh_max_physic(self) -> None:
        self.max_physic_offset = 0
        last = self.files.last_file
        if last and last.wrote_position:
            offset, size, _ = ENTRY.unpack_from(last.view, last.wrote_position - ENTRY_SIZE)
            self.max_physic_offset = offset + size

    def truncate_dirty(self, commitlog_end: int) -> None:
        """Drop entries pointing at or beyond ``commitlog_end`` (a cut commit-log tail)."""
        while self.max_physic_offset > commitlog_end and (last := self.files.last_file) is not None:
            pos = last.wrote_position
            while pos > 0:
                offset, size, _ = ENTRY.unpack_from(last.view, pos - ENTRY_SIZE)
                if offset + size <= commitlog_end:
                    break
                pos -= ENTRY_SIZE
            self.files.truncate_dirty(last.file_from_offset + pos)
            emptied_only_file = pos == 0 and len(self.files.files) <= 1
            if pos == 0 and not emptied_only_file:
                # The whole file went: the cut goes on in the one before (it used to stop there,
                # leaving that file's entries beyond the cut).
                self.files.files.pop().destroy()
            self._refresh_max_physic()
            if emptied_only_file:
                break

    # -- writing ------------------------------------------------------------------------------
    def put(self, commitlog_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry for logical ``queue_offset``; a replayed (older) one is skipped."""
        if commitlog_offset + size <= self.max_physic_offset:
            return False
        mapped = self.files.files[-1] if self.files.files else None
        position = mapped.wrote_position if mapped is not None else 0
        # The hot path: the entry goes right after the last one, in a segment with room.
        if (
            mapped is None
            or position >= self.file_size
            or queue_offset * ENTRY_SIZE != mapped.file_from_offset + position
        ):
            mapped = self._segment_for(queue_offset)
            if mapped is None:
                return False
            position = mapped.wrote_position
        if position + ENTRY_SIZE > mapped.reserved:
            mapped.reserve_to(position + ENTRY_SIZE)  # SegmentAllocationError: dispatch waits
        ENTRY.pack_into(mapped.view, position, commitlog_offset, size, tags_code)
        mapped.wrote_position = position + ENTRY_SIZE
        self.max_physic_offset = commitlog_offset + size
        return True

    def _segment_for(self, queue_offset: int):
        """The segment where ``queue_offset``'s entry goes (None for a replayed entry)."""
        expected = queue_offset * ENTRY_SIZE
        if self.files.last_file is None:
            # An empty queue whose messages start past 0 (its files were removed): begin there.
            mapped = self.files.create_file(expected - expected % self.file_size)
            mapped.wrote_position = expected - mapped.file_from_offset
            self.min_logic_offset = expected
            return mapped
        mapped = self.files.last_file_for_write()
        current = mapped.file_from_offset + mapped.wrote_position
        if expected < current:
            return None
        if expected > current:
            self._fill_gap(current, expected)
            mapped = self.files.last_file_for_write()
        return mapped

    def _fill_gap(self, current: int, expected: int) -> None:
        """Blank entries for queue offsets whose records cannot be dispatched (quarantined as
        damaged), as RocketMQ's fillPreBlank: a read finds nothing there and moves on."""
        missing = (expected - current) // ENTRY_SIZE
        if missing > MAX_GAP_ENTRIES:
            raise ValueError(
                f"consume queue {self.topic}/{self.queue_id} expects offset "
                f"{current // ENTRY_SIZE}, got {expected // ENTRY_SIZE}"
            )
        log.warning("consume queue %s/%d: %d offsets from %d have no readable record; blank entries put",
                    self.topic, self.queue_id, missing, current // ENTRY_SIZE)  # fmt: skip
        for _ in range(missing):
            mapped = self.files.last_file_for_write()
            mapped.reserve_to(mapped.wrote_position + ENTRY_SIZE)
            ENTRY.pack_into(mapped.view, mapped.wrote_position, 0, BLANK_ENTRY_SIZE, 0)
            mapped.wrote_position += ENTRY_SIZE

    # -- reading ------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // ENTRY_SIZE

    @property
    def max_offset(self) -> int:
        """One past the last logical offset (RocketMQ's getMaxOffsetInQueue)."""
        return self.files.max_offset // ENTRY_SIZE

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        entries = self.read_entries(queue_offset, 1)
        return entries[0] if entries else None

    def read_entries(self, queue_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """Up to ``max_count`` entries from ``queue_offset``, within one segment."""
        if queue_offset < self.min_offset or queue_offset >= self.max_offset:
            return []
        position = queue_offset * ENTRY_SIZE
        mapped = self.files.find_file(position)
        if mapped is None:
            return []
        start = position - mapped.file_from_offset
        end = min(mapped.wrote_position, start + max_count * ENTRY_SIZE)
        return list(ENTRY.iter_unpack(mapped.view[start:end]))

    def offset_by_time(self, timestamp_ms: int, store_time_of: Callable[[int, int], int]) -> int:
        """First logical offset whose message was stored at or after ``timestamp_ms``
        (the max offset when none is) — binary search over store times."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            if entry is None:
                lo = mid + 1
                continue
            if store_time_of(entry[0], entry[1]) < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- retention ----------------------------------------------------------------------------
    def delete_expired(self, commitlog_min_offset: int) -> int:
        """Delete segments whose every entry points below ``commitlog_min_offset``."""
        removed = 0
        # Read afresh each turn: delete_first replaces the list.
        while len(files := self.files.files) > 1 and files[0].reserved == self.file_size:
            last_entry = ENTRY.unpack_from(files[0].view, self.file_size - ENTRY_SIZE)
            if last_entry[0] + last_entry[1] > commitlog_min_offset:
                break
            self.files.delete_first(1)
            removed += 1
        self.correct_min_offset(commitlog_min_offset)
        return removed

    def correct_min_offset(self, commitlog_min_offset: int) -> None:
        """Move the min offset to the first entry whose message is still in the commit log
        (RocketMQ's correctMinOffset): after retention deleted segments, and at start, where
        the first file may still begin with entries of deleted segments."""
        first = self.files.files[0] if self.files.files else None
        if first is None:
            return
        view = first.view
        # Entries point ever further into the commit log: binary search the first live one.
        lo = max(self.min_logic_offset, first.file_from_offset) - first.file_from_offset
        lo //= ENTRY_SIZE
        hi = first.wrote_position // ENTRY_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if ENTRY.unpack_from(view, mid * ENTRY_SIZE)[0] >= commitlog_min_offset:
                hi = mid
            else:
                lo = mid + 1
        self.min_logic_offset = first.file_from_offset + lo * ENTRY_SIZE

    def flush(self) -> None:
        self.files.flush()

    def shutdown(self) -> None:
        self.files.shutdown()

    def destroy(self) -> None:
        self.files.destroy()
