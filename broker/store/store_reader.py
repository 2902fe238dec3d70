"""Reading the store: messages by (topic, queue, logical offset) as raw stored records ready for a
pull response, queue bounds, store times, offsets by time, and lookups by commit-log offset or by
key (the index).

Every record served is checked first (``record_damage``: header, stored physical offset, body
CRC): one that fails is quarantined and passed over like a removed message, never served as
intact; entries pointing into a quarantined range are passed over without reading."""

from __future__ import annotations

import logging

from broker.common.message import MessageExt
from broker.common.message_codec import (
    LONG,
    decode_message,
    record_damage,
    record_queue,
    store_timestamp_position,
)

from .commitlog import CommitLog
from .consume_queue import BLANK_ENTRY_SIZE, ConsumeQueue
from .consume_queue_table import ConsumeQueueTable
from .index import IndexService
from .quarantine import PURGED_TOPIC, CommitLogQuarantine
from .results import GetMessageResult, GetMessageStatus
from .store_config import MessageStoreConfig

log = logging.getLogger(__name__)


class StoreReader:
    def __init__(
        self,
        config: MessageStoreConfig,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService,
        quarantine: CommitLogQuarantine,
    ) -> None:
        self.config = config
        self.quarantine = quarantine
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.get_count = 0  # messages handed out
        self.get_found_count = self.get_miss_count = 0  # reads that found messages, or none

    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_count: int, message_filter=None
    ) -> GetMessageResult:
        queue = self.queues.find(topic, queue_id)
        if queue is None:
            self.get_miss_count += 1
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
        min_offset, max_offset = queue.min_offset, queue.max_offset
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
        if max_offset == 0:
            result.next_begin_offset = 0
        elif offset < min_offset:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
        elif offset == max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = min_offset if min_offset == 0 else max_offset
        else:
            self._read_messages(queue, offset, max_count, message_filter, result)
        self.get_count += len(result.messages)
        if result.status is GetMessageStatus.FOUND:
            self.get_found_count += 1
        else:
            self.get_miss_count += 1
        return result

    def _read_messages(
        self, queue: ConsumeQueue, offset: int, max_count: int, message_filter, result: GetMessageResult
    ) -> None:
        max_bytes = self.config.max_transfer_bytes_on_message_in_memory
        scan_limit = max(max_count, min(self.config.max_filter_message_count, max_count * 20))
        entries = queue.read_entries(offset, scan_limit if message_filter else max_count)
        read = self._read_entry
        messages, offsets = result.messages, result.queue_offsets
        size_total = 0
        next_offset = offset
        removed = False
        for phy, size, tags_code in entries:
            # A blank entry's size says nothing about bytes: it never ends a batch.
            full = messages and size != BLANK_ENTRY_SIZE and size_total + size > max_bytes
            if len(messages) >= max_count or full:
                break
            next_offset += 1
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                continue
            record = read(queue, next_offset - 1, phy, size)
            if record is None:
                removed = True
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(record):
                continue
            messages.append(record)
            offsets.append(next_offset - 1)
            size_total += len(record)
        result.next_begin_offset = next_offset
        if messages:
            result.status = GetMessageStatus.FOUND
        elif removed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        elif entries:
            result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_FOUND_NULL, offset

    def _read_entry(self, queue: ConsumeQueue, queue_offset: int, offset: int, size: int) -> bytes | None:
        """The record a consume-queue entry points at, if it is intact and is that entry's
        message. A damaged entry (a stray write in the queue file) may point at a sound record of
        another queue, or give a wrong size: the record is then neither served nor quarantined,
        the log being sound; read by its own header, a record of this queue is served."""
        if size == BLANK_ENTRY_SIZE:  # a queue offset whose record was never dispatched (damage)
            return None
        if offset < 0 or size <= 0:  # no record is there: garbage in the queue file
            _entry_damaged(queue, queue_offset, offset, size, "no record's place")
            return None
        if self.quarantine.covering(offset) is not None:
            return None
        record = self.commitlog.read(offset, size)
        if record is None or record_damage(record, 0, offset, size) is not None:
            record = self._read_by_own_size(offset, size)
            if record is None:
                return None
        topic, queue_id, stored_offset = record_queue(record)
        if (queue_id, stored_offset) == (queue.queue_id, queue_offset) and topic == queue.topic_bytes:
            return record
        if topic != PURGED_TOPIC:  # a filler stands for a purged range: removed, nothing wrong
            found = f"a record of {topic.decode(errors='replace')}/{queue_id} offset {stored_offset}"
            _entry_damaged(queue, queue_offset, offset, size, found)
        return None

    def _read_by_own_size(self, offset: int, size: int) -> bytes | None:
        """The record at ``offset`` read by its header's size, when an entry's size is not its:
        the entry is wrong, not the log, if the record so read is sound."""
        own = self.commitlog.record_size_at(offset)
        if own is None or own == size:  # the entry agrees with the header: the record is damaged
            return self._read_checked(offset, size)
        return self._read_checked(offset, own)

    def _read_checked(self, offset: int, size: int) -> bytes | None:
        """The record at ``offset`` if it is intact; None when it is gone or damaged (then it is
        quarantined: reported, and passed over by every later read)."""
        quarantine = self.quarantine
        if quarantine.covering(offset) is not None:
            return None
        record = self.commitlog.read(offset, size)
        if record is None:
            return None
        damage = record_damage(record, 0, offset, size)
        if damage is not None:
            quarantine.report(offset, damage)
            return None
        return record

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.queues.find(topic, queue_id)
        return queue.max_offset if queue else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.queues.find(topic, queue_id)
        return queue.min_offset if queue else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        queue = self.queues.find(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        return entry[0] if entry else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        queue = self.queues.find(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        return self._store_time_of(entry[0], entry[1]) if entry else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        queue = self.queues.find(topic, queue_id)
        return self.get_message_store_timestamp(topic, queue_id, queue.min_offset) if queue else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self.queues.find(topic, queue_id)
        return queue.offset_by_time(timestamp_ms, self._store_time_of) if queue else 0

    def _store_time_of(self, commitlog_offset: int, size: int) -> int:
        head = self.commitlog.read(commitlog_offset, min(size, 96))
        if head is None:
            return -1
        sys_flag = int.from_bytes(head[36:40], "big", signed=True)
        return LONG.unpack_from(head, store_timestamp_position(sys_flag))[0]

    def store_timestamp_at(self, commitlog_offset: int) -> int:
        """Store time of the record at ``commitlog_offset`` — or, at a segment's seal, of the next
        segment's first record; -1 when there is none (the log's end)."""
        size = self.commitlog.record_size_at(commitlog_offset)
        if size is None and commitlog_offset < self.commitlog.max_offset:  # a seal: the next segment
            file_size = self.commitlog.file_size
            commitlog_offset += file_size - commitlog_offset % file_size
            size = self.commitlog.record_size_at(commitlog_offset)
        return self._store_time_of(commitlog_offset, size) if size else -1

    def earliest_message_time(self) -> int:
        """Store time of the oldest message in the commit log; -1 when it holds none."""
        offset = self.commitlog.min_offset
        size = self.commitlog.record_size_at(offset) if offset < self.commitlog.max_offset else None
        return self._store_time_of(offset, size) if size else -1

    def select_one_message_by_offset(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        if self.quarantine.covering(commitlog_offset) is not None:
            return None
        size = size or self.commitlog.record_size_at(commitlog_offset)
        return self._read_checked(commitlog_offset, size) if size else None

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        record = self.select_one_message_by_offset(commitlog_offset)
        return decode_message(record) if record else None

    def record_starting_at(self, commitlog_offset: int) -> bytes | None:
        """The record that starts at ``commitlog_offset``, an offset a client sent; None when no
        record starts there. A record's body may hold bytes laid out as a record, whose declared
        length then runs over the records written after it: read at an offset inside a body,
        they would pass another topic's messages off as one message of the sender's. The broker
        wrote each record's own offset into it, and the body CRC covers bytes written after the
        forged header, which its sender cannot know."""
        commitlog = self.commitlog
        if not commitlog.min_offset <= commitlog_offset < commitlog.max_offset:
            return None
        if self.quarantine.covering(commitlog_offset) is not None:
            return None
        size = commitlog.record_size_at(commitlog_offset)
        record = commitlog.read(commitlog_offset, size) if size else None
        # Not reported as damage (``_read_checked``): anyone may send any offset, and a forged
        # header there would raise the damaged-data alarm and quarantine the sender's own bytes.
        # Real damage is found by the reads that follow the consume queues and by recovery.
        if record is None or record_damage(record, 0, commitlog_offset, size) is not None:
            return None
        return record

    def message_starting_at(self, commitlog_offset: int) -> MessageExt | None:
        """``record_starting_at`` decoded: the message a client names by offset, or None."""
        record = self.record_starting_at(commitlog_offset)
        return decode_message(record) if record else None

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` (a key or the unique id) stored in the time range."""
        found = []
        for offset in self.index.query_offsets(topic, key, max_num * 4, begin_ms, end_ms):
            if offset >= self.commitlog.max_offset or offset < self.commitlog.min_offset:
                continue
            msg = self.look_message_by_offset(offset)
            if msg and msg.topic == topic and (key in msg.keys or msg.unique_key == key):
                found.append(msg)
            if len(found) >= max_num:
                break
        return found


def _entry_damaged(queue: ConsumeQueue, queue_offset: int, offset: int, size: int, found: str) -> None:
    log.error(
        "consume queue %s/%d: entry %d is damaged (it points at %d, %d bytes: %s): passed over; "
        "the commit log is not blamed",
        queue.topic, queue.queue_id, queue_offset, offset, size, found,
    )  # fmt: skip
