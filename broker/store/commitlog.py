"""The commit log: one append-only log of every message, in fixed-size segments.

Appends happen under one lock (the order of the log is the order of the world); records are
encoded before the lock is taken and only offsets and the store timestamp are patched inside.
A segment that cannot fit the next record gets a blank end record and the log rolls over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.common.message_codec import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    encode_blank,
    patch_store_fields,
    read_record_size,
)
from broker.common.sysflag import visible_to_consumers

from .mapped_file import MappedFile, MappedFileQueue

# Every segment keeps room for at least a blank record after its last message.
END_FILE_MIN_BLANK_LENGTH = 8


class PendingRecord:
    """A record encoded outside the lock, waiting for its place in the log."""

    __slots__ = (
        "buf", "properties", "queue_id", "queue_offset", "sys_flag", "tags_code", "topic", "wrote_offset",
    )  # fmt: skip

    def __init__(self, buf: bytearray, topic: str, queue_id: int, sys_flag: int, properties: dict,
                 tags_code: int | None) -> None:  # fmt: skip
        self.buf = buf
        self.properties = properties
        # None when it depends on the store time (the schedule topic's delivery time).
        self.tags_code = tags_code
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.wrote_offset = 0
        self.queue_offset = 0


class CommitLog:
    def __init__(self, directory: Path, file_size: int, clock: Callable[[], float] = time.time) -> None:
        self.files = MappedFileQueue(directory, file_size, restore_short=True)
        self.file_size = file_size
        self.lock = threading.Lock()
        # Next logical offset of every (topic, queue id): assigned here, in commit order.
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self._clock = clock
        # Told of each segment the log rolls past (sealed: never written again). Runs under the
        # append lock, on the path of a put: it must only hand the work to another thread.
        self.on_segment_sealed: Callable[[MappedFile], None] | None = None

    def append(self, records: list[PendingRecord], on_appended: Callable[[PendingRecord, int], None]) -> int:
        """Append records (one message, or one batch for one queue) atomically in order.

        Returns the store timestamp. ``on_appended(record, store_timestamp)`` runs for each
        record under the lock, so dispatch requests are queued in commit order.
        """
        total = len(records[0].buf) if len(records) == 1 else sum(len(r.buf) for r in records)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise ValueError(f"{total} bytes cannot fit a commit-log segment of {self.file_size}")
        with self.lock:
            store_ts = int(self._clock() * 1000)
            mapped = self._file_with_room(total)
            offset = mapped.end_offset
            for record in records:
                self._place(record, offset, store_ts)
                offset += len(record.buf)
            mapped.append(b"".join(r.buf for r in records) if len(records) > 1 else records[0].buf)
            for record in records:
                on_appended(record, store_ts)
            return store_ts

    def _file_with_room(self, size: int) -> MappedFile:
        files = self.files.files
        if files and files[-1].wrote_position + size + END_FILE_MIN_BLANK_LENGTH <= self.file_size:
            return files[-1]  # the common case, without a call per check
        if not files:
            return self.files.create_file(0)
        mapped = files[-1]
        # The next segment is made before this one is sealed: when the disk has no room for it
        # (SegmentAllocationError) the log is left exactly as it was.
        following = self.files.create_file(mapped.file_from_offset + self.file_size, register=False)
        if not mapped.is_full:
            mapped.append(encode_blank(mapped.remaining))
            mapped.wrote_position = self.file_size
            if self.on_segment_sealed is not None:
                self.on_segment_sealed(mapped)
        self.files.add(following)
        return following

    def _place(self, record: PendingRecord, offset: int, store_ts: int) -> None:
        if visible_to_consumers(record.sys_flag):
            key = (record.topic, record.queue_id)
            queue_offset = self.queue_offsets.get(key, 0)
            self.queue_offsets[key] = queue_offset + 1
        else:
            queue_offset = 0  # takes no slot in the consume queue
        record.wrote_offset = offset
        record.queue_offset = queue_offset
        patch_store_fields(record.buf, 0, queue_offset, offset, store_ts, record.sys_flag)

    # -- reading ------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def read(self, offset: int, size: int) -> bytes | None:
        mapped = self.files.find_file(offset)
        if mapped is None:
            return None
        pos = offset - mapped.file_from_offset
        if pos + size > mapped.wrote_position:
            return None
        return mapped.read(pos, size)

    def record_size_at(self, offset: int) -> int | None:
        mapped = self.files.find_file(offset)
        if mapped is None or offset - mapped.file_from_offset + 8 > mapped.wrote_position:
            return None
        size, magic = read_record_size(mapped.view, offset - mapped.file_from_offset)
        return size if magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) else None

    def flush(self) -> int:
        return self.files.flush()
