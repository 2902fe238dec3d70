"""The store side of replication: a slave's commit log written with its master's bytes, and the
cut of a divergent tail.

A slave never encodes a record: it appends the master's bytes at exactly the master's offsets
(``append``), so every record, offset and message id is the master's. Its consume queues and
index are then built the way recovery builds them, by walking the commit log
(``recovery.replay`` + ``request_from_record``): one codec and one dispatch for both roles. A
frame may end inside a record; the walk stops before it and resumes when the rest arrives.

``truncate`` cuts the log back to an offset (a slave ahead of its master after a failover):
commit log, consume queues, queue offsets and index all end there, so the master's bytes can
follow as if the tail had never been written. ``clear`` drops the whole log (a slave that shares
no epoch with its master), so the master's can be copied from its oldest segment.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.common.message_codec import (
    BLANK,
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
)

from . import recovery
from .dispatch import request_from_record

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger(__name__)


class ReplicationError(ValueError):
    """Replicated bytes that cannot be placed (a gap, a frame across segments, not records):
    nothing of them was kept, and the connection to the master should be dropped."""


class ReplicaLog:
    """Appends a master's bytes to one store and dispatches the records they complete."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        # End of the last whole record walked (dispatched or queued for dispatch); bytes beyond
        # it are the start of a record whose rest has not arrived yet.
        self.scan_offset = store.commitlog.max_offset
        # End of the last record handed to dispatch (below scan_offset when the walk went past a
        # segment's blank seal): what a truncation waits for.
        self.submitted_end = 0
        # The log's end as this writer last left it: beyond it are records the store appended
        # itself, as a master (a broker switches roles at run time).
        self._log_end = store.commitlog.max_offset

    def _take_own_writes(self) -> None:
        """Records the store appended itself since this writer last wrote (it was master
        meanwhile) are whole and dispatched by the put path: the walk goes on after them."""
        store = self.store
        end = store.commitlog.max_offset
        if end > self._log_end:
            if not store.reput.stalled:
                store.reput.wait_dispatched(end, timeout=30)
            self.scan_offset = self.submitted_end = end
        elif end < self._log_end:
            self.scan_offset = min(self.scan_offset, end)
        self._log_end = end

    def cut_incomplete_tail(self) -> int:
        """Cut a replicated record whose rest never arrived, and return the log's end: what a
        slave becoming master does before it takes puts of its own (RocketMQ's
        truncateInvalidMsg), so its first record does not follow half of one."""
        self._take_own_writes()
        if self.scan_offset < self.store.commitlog.max_offset:
            log.warning("an incomplete replicated record at %d is cut", self.scan_offset)
            self.truncate(self.scan_offset)
        return self.store.commitlog.max_offset

    def append(self, offset: int, data: bytes | bytearray) -> int:
        """Write ``data`` at commit-log ``offset`` (which must be the log's end, or — for an
        empty log — a segment start); return the log's new end."""
        self._take_own_writes()
        commitlog = self.store.commitlog
        files, file_size = commitlog.files, commitlog.file_size
        with commitlog.lock:
            last = files.last_file
            end = commitlog.max_offset
            if last is None:
                if offset % file_size:
                    raise ReplicationError(f"an empty commit log starts at a segment, not at {offset}")
                self.scan_offset = offset
            elif offset != end:
                raise ReplicationError(f"the master sent offset {offset}, this commit log ends at {end}")
            start = offset - offset % file_size
            if len(data) > file_size - (offset - start):
                raise ReplicationError(f"{len(data)} bytes at {offset} cross a segment end")
            # A new segment may fail to allocate (SegmentAllocationError): nothing is written.
            mapped = files.create_file(start) if last is None or last.is_full else last
            mapped.append(data)
            self._log_end = commitlog.max_offset
        self._dispatch()
        return commitlog.max_offset

    def _dispatch(self) -> None:
        store = self.store
        queue_offsets = store.commitlog.queue_offsets
        delay_levels = store.config.delay_levels_ms()
        submit = store.reput.submit

        def apply(view, pos, _offset):
            request = request_from_record(view, pos, delay_levels, check_crc=False)
            if request.goes_to_consume_queue:
                # What the next put would take, should this store become a master.
                queue_offsets[(request.topic, request.queue_id)] = request.queue_offset + 1
            store.note_replicated(request.store_timestamp)
            submit(request)
            self.submitted_end = request.commitlog_offset + request.size

        try:
            self.scan_offset = recovery.replay(store.commitlog, self.scan_offset, apply)
        except ValueError as exc:  # MessageDecodeError: the bytes are no record
            self._drop_unsound_tail(f"a replicated record at {self.scan_offset} does not decode: {exc}")
        if not self._tail_may_complete():
            self._drop_unsound_tail(f"the replicated bytes at {self.scan_offset} are not a record")

    def _tail_may_complete(self) -> bool:
        """Whether the bytes after the last whole record can be the start of one."""
        commitlog = self.store.commitlog
        mapped = commitlog.files.find_file(self.scan_offset)
        if mapped is None:
            return True
        pos = self.scan_offset - mapped.file_from_offset
        if mapped.wrote_position - pos < BLANK.size:
            return True
        size, magic = BLANK.unpack_from(mapped.view, pos)
        if magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            return MIN_RECORD_SIZE <= size <= mapped.file_size - pos
        # The master's seal: a blank record to the segment's end, which may come in several frames
        # (replay walks past it once the segment is full).
        return magic == BLANK_MAGIC_CODE and size == mapped.file_size - pos

    def _drop_unsound_tail(self, reason: str) -> None:
        self.truncate(self.scan_offset)
        raise ReplicationError(reason)

    # -- cutting a divergent tail ----------------------------------------------------------------
    def truncate(self, offset: int) -> int:
        """Make ``offset`` the end of the commit log, and of everything built from it; return
        how many bytes were dropped. Dispatch of the records before ``offset`` is finished first,
        so no queued entry lands after the cut."""
        self._take_own_writes()
        store = self.store
        commitlog = store.commitlog
        if not store.reput.stalled:  # a stalled dispatch replays from its offset later
            store.reput.wait_dispatched(self.submitted_end, timeout=30)
        with commitlog.lock:
            end = commitlog.max_offset
            if offset >= end:
                return 0
            commitlog.files.truncate_dirty(offset)
            store.quarantine.forget_from(offset)
            for key, queue in list(store.consume_queues.items()):
                queue.truncate_dirty(offset)
                if queue.max_offset == 0:  # only the tail wrote to it: as if never made
                    store.drop_consume_queue(key)
                else:
                    commitlog.queue_offsets[key] = queue.max_offset
            store.index.truncate_beyond(offset)
            store.reput.dispatched_offset = min(store.reput.dispatched_offset, offset)
            self.scan_offset = min(self.scan_offset, commitlog.max_offset)
            self._log_end = commitlog.max_offset
        dropped = end - offset
        log.warning(
            "commit log cut from %d to %d (%d bytes dropped) to follow the master", end, offset, dropped
        )
        return dropped

    def clear(self) -> int:
        """Drop the whole log, and everything built from it; return how many bytes were
        dropped. The next append may then start at any segment (the master's oldest)."""
        store = self.store
        commitlog = store.commitlog
        start, end = commitlog.min_offset, commitlog.max_offset
        if not commitlog.files.files:
            return 0
        self.truncate(start)
        with commitlog.lock:
            # truncate() keeps the emptied first segment; an offset below it removes that too.
            commitlog.files.truncate_dirty(start - 1)
            for key in list(store.consume_queues):
                store.drop_consume_queue(key)
            commitlog.queue_offsets.clear()
            store.reput.dispatched_offset = 0
            self.scan_offset = self.submitted_end = self._log_end = 0
        log.warning("commit log dropped whole (%d bytes from %d) to copy the master's", end - start, start)
        return end - start
