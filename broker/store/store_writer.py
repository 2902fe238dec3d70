"""Putting messages: validate and encode outside the commit-log lock, append under it, queue each
record's dispatch in commit order, and answer — at once, or after a SYNC_FLUSH and (on a
SYNC_MASTER) a slave's confirmation. This is the broker's hot path: keep it lean."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Awaitable

from broker.common import message_const as const
from broker.common.java_hash import tag_hash_code
from broker.common.message import HostPort, MessageExt
from broker.common.message_codec import (
    MAX_PROPERTIES_LENGTH,
    encode_host,
    encode_record,
    host_sys_flags,
    properties_to_string,
)
from broker.common.names import KNOWN_LEGAL_TOPICS, topic_problem
from broker.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from broker.common.topic_config import SCHEDULE_TOPIC

from .commitlog import CommitLog, PendingRecord
from .dispatch import DispatchRequest, ReputService, compute_tags_code
from .flush import GroupCommitService
from .mapped_file import SegmentAllocationError
from .results import (
    AppendMessageResult,
    PutMessageResult,
    PutMessageStatus,
    create_mapped_file_failed,
)
from .store_config import MessageStoreConfig
from .store_replication import StoreReplication
from .store_writability import StoreWritability

log = logging.getLogger(__name__)


class StoreWriter:
    def __init__(
        self,
        config: MessageStoreConfig,
        commitlog: CommitLog,
        reput: ReputService,
        writability: StoreWritability,
        replication: StoreReplication,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.reput = reput
        self.writability = writability
        self.replication = replication
        # SYNC_FLUSH only (made when the store starts): the flush a put waits for.
        self.group_commit: GroupCommitService | None = None
        self._store_host = encode_host(config.store_host_port)
        self._delay_levels = config.delay_levels_ms()
        # The last producer address seen and its encoding (most puts come from the same one).
        self._last_born: HostPort | None = None
        self._last_born_bytes = b""
        self._properties_limit = min(config.max_properties_size, MAX_PROPERTIES_LENGTH)
        self.last_appended_ts = 0  # store time of the last record appended (or replicated)
        self.put_count = self.put_size = 0

    def put_message(self, msg: MessageExt) -> PutMessageResult:
        if self.group_commit is None:
            return self._append([msg])  # ASYNC_FLUSH: nothing to wait for, no batch to check
        return self.put_messages([msg])

    def put_messages(self, batch: list[MessageExt]) -> PutMessageResult:
        """Store a batch for one topic and queue: consecutive queue offsets, one append."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self.group_commit
        if flush_to is None or group_commit is None:
            return result
        try:
            flushed = group_commit.request(flush_to).result(self.config.sync_flush_timeout / 1000)
        except (concurrent.futures.TimeoutError, RuntimeError, OSError):
            flushed = False
        return _flushed_result(result, flushed)

    async def put_messages_async(self, batch: list[MessageExt]) -> PutMessageResult:
        """As ``put_messages``, but waits for a sync flush without blocking the event loop.

        The broker's own puts (delay, retry, transactions, replies, traces) come this way and do
        not wait for a SYNC_MASTER's slave: their callers take any status but PUT_OK as "not
        stored" and would put again; the records reach the slave all the same."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self.group_commit
        if flush_to is None or group_commit is None:
            return result
        return await _after_flush(result, group_commit.request_async(flush_to))

    def put_messages_or_wait(self, batch: list[MessageExt]) -> PutMessageResult | Awaitable[PutMessageResult]:
        """Append on the event loop: the result, or — when a SYNC_FLUSH must be waited for — an
        awaitable of it. Callers that can answer at once then need no coroutine or task."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self.group_commit
        flushed = None
        if flush_to is not None and group_commit is not None:
            flushed = _after_flush(result, group_commit.request_async(flush_to))
        if self.replication.replica_wait is not None:  # SYNC_MASTER: one attribute on every other put
            return self.replication.answer_after_slave(result, batch, flushed)
        return result if flushed is None else flushed

    def _append_for_flush(self, batch: list[MessageExt]) -> tuple[PutMessageResult, int | None]:
        """Append; with SYNC_FLUSH also return the offset the caller must see flushed."""
        # A single message (the usual put) is no batch to check: no call.
        result = (_check_batch(batch) if len(batch) != 1 else None) or self._append(batch)
        append = result.append
        # ``result.ok`` spelled out: once per put.
        ok = result.status is PutMessageStatus.PUT_OK
        if not (ok and self.group_commit is not None and batch[0].wait_store_msg_ok) or append is None:
            return result, None
        return result, append.wrote_offset + append.wrote_bytes

    def _append(self, messages: list[MessageExt]) -> PutMessageResult:
        writability = self.writability
        if not writability.writable:
            return writability.refused()
        records: list[PendingRecord] = []
        for msg in messages:
            encoded = self._encode(msg)
            if isinstance(encoded, PutMessageResult):
                return encoded
            records.append(encoded)
        total = len(records[0].buf) if len(records) == 1 else sum(len(r.buf) for r in records)
        if total > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"batch is {total} bytes, the limit is {self.config.max_message_size}",
            )
        try:
            store_ts = self.commitlog.append(records, self._on_appended)
        except SegmentAllocationError as exc:  # nothing written: the log is as it was
            writability.disk_guard.allocation_failed(exc)
            return create_mapped_file_failed(str(exc))
        except OSError as exc:
            log.exception("commit log append failed")
            return create_mapped_file_failed(str(exc))
        self.last_appended_ts = store_ts
        first = records[0]
        self.put_count += len(records)
        self.put_size += total
        append = AppendMessageResult(
            first.wrote_offset,
            total,
            store_ts,
            first.queue_offset,
            len(records),
            self._store_host,
            (first.wrote_offset,) if len(records) == 1 else tuple(r.wrote_offset for r in records),
        )
        return PutMessageResult(PutMessageStatus.PUT_OK, append)

    def _encode(self, msg: MessageExt) -> PendingRecord | PutMessageResult:
        """Validate and encode one message outside the commit-log lock (the hot path: keep lean)."""
        topic = msg.topic
        # A name seen before: one set lookup, no call (the type first: any object may be put here).
        if type(topic) is not str or topic not in KNOWN_LEGAL_TOPICS:
            reason = topic_problem(topic)
            if reason:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=reason)
        props = msg.properties
        properties = properties_to_string(props).encode() if props else b""
        if len(properties) > self._properties_limit:
            remark = f"properties are {len(properties)} bytes, the limit is {self._properties_limit}"
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, remark=remark)
        born = msg.born_host
        if born != self._last_born:  # a producer sends many messages from one address: skip the lookup
            self._last_born, self._last_born_bytes = born, encode_host(tuple(born))
        born_host = self._last_born_bytes
        sys_flag = msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
        if len(born_host) != 8 or len(self._store_host) != 8:
            sys_flag |= host_sys_flags(born_host, self._store_host)
        record = encode_record(
            msg.queue_id,
            msg.flag,
            sys_flag,
            msg.born_timestamp,
            born_host,
            self._store_host,
            msg.body,
            topic.encode(),
            properties,
            msg.reconsume_times,
            msg.prepared_transaction_offset,
        )
        if len(record) > self.config.max_message_size:
            remark = f"message is {len(record)} bytes, the limit is {self.config.max_message_size}"
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=remark)
        tags_code = None if topic == SCHEDULE_TOPIC else tag_hash_code(props.get(const.PROPERTY_TAGS))
        return PendingRecord(record, topic, msg.queue_id, sys_flag, props, tags_code)

    def _on_appended(self, record: PendingRecord, store_ts: int) -> None:
        """Queue the dispatch of a record; runs under the commit-log lock, so in commit order."""
        props = record.properties
        tags_code = record.tags_code
        if tags_code is None:
            tags_code = compute_tags_code(record.topic, props, store_ts, self._delay_levels)
        self.reput.submit(
            DispatchRequest(
                record.topic,
                record.queue_id,
                record.wrote_offset,
                len(record.buf),
                tags_code,
                store_ts,
                record.queue_offset,
                props.get(const.PROPERTY_KEYS),
                props.get(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                record.sys_flag,
                props,
            )
        )


def _check_batch(batch: list[MessageExt]) -> PutMessageResult | None:
    if len(batch) == 1:
        return None
    if not batch:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="empty batch")
    first = batch[0]
    if any(m.topic != first.topic or m.queue_id != first.queue_id for m in batch[1:]):
        return PutMessageResult(
            PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch must target one topic and one queue"
        )
    return None


def _flushed_result(result: PutMessageResult, flushed: bool) -> PutMessageResult:
    if not flushed:
        result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
    return result


async def _after_flush(result: PutMessageResult, flushed_future) -> PutMessageResult:
    try:
        flushed = await flushed_future
    except (RuntimeError, OSError):
        flushed = False
    return _flushed_result(result, flushed)
