"""Find messages by key: RocketMQ's IndexFile (a hash table with chained entries on disk).

File layout::

    header 40: beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8
               | hashSlotCount 4 | indexCount 4
    slots:     hashSlotNum x 4 (number of the newest entry in the slot, 0 = empty)
    entries:   maxIndexNum x 20: keyHash 4 | phyOffset 8 | timeDiff (s since begin) 4 | prevIndex 4

Keys are ``topic#key``; a lookup walks a slot's chain newest first and the caller checks the
real key, since different keys may share a hash.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from broker.common.java_hash import java_hash_continued

from .mapped_file import create_reserved_file, open_reserved_file

log = logging.getLogger(__name__)
HEADER = struct.Struct(">qqqqii")
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")


def index_file_size(slot_num: int, index_num: int) -> int:
    return HEADER.size + slot_num * SLOT.size + index_num * ENTRY.size


def index_key_hash(topic: str, key: str) -> int:
    """RocketMQ's slot hash: ``abs("topic#key".hashCode())``."""
    return _slot_hash(java_hash_continued(_prefix_hash(f"{topic}#"), key))


def unique_key_hash(topic: str, unique_key: str) -> int:
    """``index_key_hash`` of a message's unique id. Its first 20 hex digits (the producer's
    address, pid and a random number) repeat in every message of a producer, so their share of
    the hash is computed once per producer instead of once per message."""
    if len(unique_key) != 32:
        return index_key_hash(topic, unique_key)
    prefix = _prefix_hash(f"{topic}#{unique_key[:20]}")
    return _slot_hash(java_hash_continued(prefix, unique_key[20:]))


@lru_cache(maxsize=4096)
def _prefix_hash(prefix: str) -> int:
    return java_hash_continued(0, prefix)


def _slot_hash(unsigned: int) -> int:
    return abs(unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned) & 0x7FFFFFFF


class IndexFile:
    def __init__(self, path: Path, slot_num: int, index_num: int) -> None:
        """Open the index file at ``path``, or create it, with all its blocks reserved
        (``SegmentAllocationError`` when the disk has no room: nothing is created)."""
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        size = index_file_size(slot_num, index_num)
        # The descriptor stays open so flush can fdatasync it: mmap.flush holds the GIL through
        # the msync, stalling every other thread of the broker (a latency spike per flush).
        if path.exists():  # given its blocks first if an older version left it sparse
            self._fd = open_reserved_file(path, size)
        else:
            self._fd = create_reserved_file(path, size)
        self._map = mmap.mmap(self._fd, size)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = HEADER.unpack_from(self._map, 0)  # fmt: skip
        if self.index_count == 0:
            self.index_count = 1  # entry 0 means "empty slot"

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def put(self, key_hash: int, phy_offset: int, store_ts: int) -> bool:
        if self.index_count >= self.index_num:  # ``is_full``, inline: once per indexed key
            return False
        slot_pos = HEADER.size + (key_hash % self.slot_num) * SLOT.size
        previous = SLOT.unpack_from(self._map, slot_pos)[0]
        if self.index_count == 1:
            self.begin_timestamp, self.begin_phy_offset = store_ts, phy_offset
        time_diff = max(0, (store_ts - self.begin_timestamp) // 1000)
        entry_pos = HEADER.size + self.slot_num * SLOT.size + self.index_count * ENTRY.size
        ENTRY.pack_into(self._map, entry_pos, key_hash, phy_offset, time_diff, previous)
        SLOT.pack_into(self._map, slot_pos, self.index_count)
        if previous == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_timestamp, self.end_phy_offset = store_ts, phy_offset
        self._write_header()
        return True

    def _write_header(self) -> None:
        HEADER.pack_into(self._map, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                         self.end_phy_offset, self.hash_slot_count, self.index_count)  # fmt: skip

    def lookup(self, key_hash: int, begin_ms: int, end_ms: int, max_num: int) -> list[int]:
        offsets: list[int] = []
        slot_pos = HEADER.size + (key_hash % self.slot_num) * SLOT.size
        number = SLOT.unpack_from(self._map, slot_pos)[0]
        entries_base = HEADER.size + self.slot_num * SLOT.size
        seen = 0
        while 0 < number < self.index_count and len(offsets) < max_num and seen < self.index_num:
            entry_hash, phy, diff, previous = ENTRY.unpack_from(self._map, entries_base + number * ENTRY.size)
            ts = self.begin_timestamp + diff * 1000
            # Time diffs are whole seconds: widen the window by one so no match is lost.
            if entry_hash == key_hash and begin_ms - 1000 <= ts <= end_ms:
                offsets.append(phy)
            if previous >= number:
                break
            number = previous
            seen += 1
        return offsets

    def flush(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        if not self._map.closed:
            os.fdatasync(self._fd)
            self._map.close()
            os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IndexService:
    """The index files of a store, oldest first; one writer (dispatch), many readers."""

    def __init__(self, index_dir: Path | str, max_hash_slot_num: int = 5_000_000,
                 max_index_num: int = 20_000_000) -> None:  # fmt: skip
        self.directory = Path(index_dir)
        self.slot_num = max_hash_slot_num
        self.index_num = max_index_num
        self.files: list[IndexFile] = []
        self._lock = threading.RLock()
        self._last_indexed_offset = -1
        self._last_flush_ts = 0

    def load(self, last_exit_ok: bool, checkpoint_index_timestamp: int) -> None:
        """Map the existing files.

        Unlike RocketMQ, files written after the checkpoint are kept after an unclean stop: their
        header says how far they got, every hit is verified against the real record by the
        reader, and re-dispatch indexes whatever lies beyond — so no key is forgotten.
        """
        if not self.directory.exists():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.name.isdigit()):
            self.files.append(IndexFile(path, self.slot_num, self.index_num))
        if self.files:
            self._last_indexed_offset = self.files[-1].end_phy_offset
        if not last_exit_ok:
            log.info("index: %d files kept after an unclean stop (checkpoint %d)", len(self.files),
                     checkpoint_index_timestamp)  # fmt: skip

    def build_index(self, topic: str, keys: list[str], unique_key: str | None,
                    commitlog_offset: int, store_timestamp_ms: int) -> None:  # fmt: skip
        if commitlog_offset <= self._last_indexed_offset:
            return  # replayed by recovery: already indexed
        with self._lock:
            if unique_key:
                self._writable_file().put(
                    unique_key_hash(topic, unique_key), commitlog_offset, store_timestamp_ms
                )
            for key in keys:
                if key:
                    self._writable_file().put(
                        index_key_hash(topic, key), commitlog_offset, store_timestamp_ms
                    )
            self._last_indexed_offset = commitlog_offset

    def _writable_file(self) -> IndexFile:
        if not self.files or self.files[-1].is_full:
            name = datetime.now().strftime("%Y%m%d%H%M%S%f")[:17]
            while (self.directory / name).exists():
                name = str(int(name) + 1)
            self.files.append(IndexFile(self.directory / name, self.slot_num, self.index_num))
        return self.files[-1]

    def query_offsets(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        key_hash = index_key_hash(topic, key)
        found: list[int] = []
        with self._lock:
            for index_file in reversed(self.files):
                if index_file.index_count <= 1:
                    continue
                if index_file.end_timestamp < begin_ms - 1000 or index_file.begin_timestamp > end_ms + 1000:
                    continue
                for offset in index_file.lookup(key_hash, begin_ms, end_ms, max_num):
                    if offset not in found:
                        found.append(offset)
                if len(found) >= max_num:
                    break
        return found[:max_num]

    def last_update_timestamp(self) -> int:
        return self.files[-1].end_timestamp if self.files else 0

    def last_commitlog_offset(self) -> int:
        return self.files[-1].end_phy_offset if self.files else 0

    def delete_expired(self, min_commitlog_offset: int) -> int:
        with self._lock:
            expired = [f for f in self.files[:-1] if f.end_phy_offset < min_commitlog_offset]
            for index_file in expired:
                index_file.destroy()
            self.files = [f for f in self.files if f not in expired]
            return len(expired)

    def truncate_beyond(self, commitlog_offset: int) -> None:
        """Forget that records from ``commitlog_offset`` on were indexed (a cut log tail).

        Stale entries may remain; readers verify each hit against the record's real keys, and
        the re-dispatched records are indexed again.
        """
        with self._lock:
            self._last_indexed_offset = min(self._last_indexed_offset, commitlog_offset - 1)

    def flush(self) -> int:
        """Flush the file being written; return the newest store time now on disk.

        The disk wait happens outside the lock: dispatch keeps indexing new messages meanwhile
        (holding it stalled every dispatch — and so every consumer — for the whole fdatasync)."""
        with self._lock:
            current = self.files[-1] if self.files else None
            newest = self.last_update_timestamp()
        if current is not None:
            current.flush()
        self._last_flush_ts = newest
        return newest

    def shutdown(self) -> None:
        with self._lock:
            for index_file in self.files:
                index_file.close()
