"""``MessageStore``: the broker's storage engine, shaped like RocketMQ's DefaultMessageStore.

Appends go to the commit log under one lock; a background thread dispatches each record to its
consume queue and the index; readers address messages by (topic, queue, logical offset) and get
the raw stored records back, ready to send in a pull response.

A full disk refuses writes and nothing else (``running_flags``, ``disk_guard``): every segment's
blocks are reserved before it is mapped, a put reads one flag, and the store takes writes again
by itself when space returns — including after a start on a full disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker.common import message_const as const
from broker.common.java_hash import tag_hash_code
from broker.common.message import HostPort, MessageExt
from broker.common.message_codec import (
    LONG,
    MAX_PROPERTIES_LENGTH,
    decode_message,
    encode_host,
    encode_record,
    host_sys_flags,
    properties_to_string,
    store_timestamp_position,
)
from broker.common.names import IllegalName, is_path_name, name_path, topic_problem
from broker.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, visible_to_consumers
from broker.common.topic_config import SCHEDULE_TOPIC

from . import recovery
from .archive import SegmentArchiver
from .archive_service import SealedSegmentArchiveService
from .checkpoint import StoreCheckpoint
from .clean_service import CleanService
from .commitlog import CommitLog, PendingRecord
from .consume_queue import ConsumeQueue
from .disk import capacity_text, disk_used_fraction, human_bytes
from .disk_guard import DiskGuard
from .dispatch import DispatchRequest, ReputService, compute_tags_code, request_from_record
from .flush import GroupCommitService, PeriodicFlushService
from .index import IndexService
from .mapped_file import SegmentAllocationError
from .replica import ReplicaLog
from .results import (
    AppendMessageResult,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    create_mapped_file_failed,
    service_not_available,
)
from .running_flags import DISK_FULL, WRITE_INDEX_FILE_ERROR, WRITE_LOGICS_QUEUE_ERROR, RunningFlags
from .store_config import MessageStoreConfig

log = logging.getLogger(__name__)
# RocketMQ's words for a put refused by a slave's store (DefaultMessageStore.checkStoreStatus).
SLAVE_MODE_REASON = "message store is slave mode, so write is not supported"


class MessageStore:
    def __init__(
        self,
        store_dir: str | Path,
        config: MessageStoreConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or MessageStoreConfig()
        self.root = Path(store_dir)
        self.clock = clock
        self.commitlog = CommitLog(self.root / "commitlog", self.config.mapped_file_size_commit_log, clock)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._cq_lock = threading.Lock()
        self.index = IndexService(
            self.root / "index", self.config.max_hash_slot_num, self.config.max_index_num
        )
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.reput = ReputService(self._make_readable, self._index_keys)
        self.reput.on_stall = self._dispatch_stalled
        self._store_host = encode_host(self.config.store_host_port)
        self._delay_levels = self.config.delay_levels_ms()
        self._group_commit: GroupCommitService | None = None
        self._services: list = []
        self.archive_service: SealedSegmentArchiveService | None = None
        self._running = False
        # The one thing a put checks: running and no RunningFlags write bit set.
        self._writable = False
        self.running_flags = RunningFlags(on_change=self._update_writable)
        self.disk_guard = DiskGuard(self.config, self.running_flags, self._disk_paths)
        self._disk_check_lock = threading.Lock()
        self._last_appended_ts = 0
        # The last producer address seen and its encoding (most puts come from the same one).
        self._last_born: HostPort | None = None
        self._last_born_bytes = b""
        self._properties_limit = min(self.config.max_properties_size, MAX_PROPERTIES_LENGTH)
        self._last_dispatched_ts = 0
        self.last_exit_ok = True
        self.put_count = self.put_size = self.get_count = 0
        self.get_found_count = self.get_miss_count = 0  # reads that found messages, or none
        self.boot_timestamp = int(clock() * 1000)
        self._replica_log: ReplicaLog | None = None
        # SYNC_MASTER only (set by the HA server): given a message's end offset, PUT_OK, a
        # slave's failure status, or an awaitable of one once a slave confirms or time runs out.
        self.replica_wait: Callable[[int], PutMessageStatus | Awaitable[PutMessageStatus]] | None = None

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def abort_file(self) -> Path:
        return self.root / "abort"

    def start(self, dispatch_loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Recover and start the services; with ``dispatch_loop``, dispatch runs on that loop
        (the broker's) instead of a thread of its own."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.last_exit_ok = not self.abort_file.exists()
        try:
            self.abort_file.touch()
        except OSError as exc:  # a full disk may have no room for even an empty file's entry
            log.error("cannot create %s (%s): a crash now would be recovered as a clean stop",
                      self.abort_file, exc)  # fmt: skip
        stalled = self._load_and_recover()
        self._start_services(dispatch_loop, stalled)
        self._running = True
        self.check_disk()
        self._update_writable()
        log.info("store at %s started (last exit %s)", self.root, "clean" if self.last_exit_ok else "UNCLEAN")

    def _load_and_recover(self) -> bool:
        """Load and recover; True when not everything could be dispatched (a full disk: the
        clean service's disk check dispatches the rest once space returns)."""
        self.commitlog.files.load()
        self._load_consume_queues()
        self.index.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)
        min_ts = self.checkpoint.min_timestamp(index_safe=self.config.message_index_enable)
        end, verified_from = recovery.recover_commitlog(self.commitlog, self.last_exit_ok, min_ts)
        for queue in self.consume_queues.values():
            queue.truncate_dirty(end)
        self.index.truncate_beyond(end)
        start = recovery.reput_start(self.commitlog, list(self.consume_queues.values()))
        if not self.last_exit_ok:
            start = min(start, verified_from)

        def apply(view, pos, _offset):
            request = request_from_record(view, pos, self._delay_levels, check_crc=False)
            self.reput.dispatch_now(request)

        self.reput.dispatched_offset = start
        stalled = False
        try:
            recovery.replay(self.commitlog, start, apply)
        except SegmentAllocationError as exc:
            stalled = True
            self._dispatch_stalled(exc, self._part_of(exc))
        min_physic = self.commitlog.min_offset
        for key, queue in self.consume_queues.items():
            self.commitlog.queue_offsets[key] = queue.max_offset
            # Retention may have deleted the segments the queue's first entries point into.
            queue.delete_expired(min_physic)
        if stalled:
            self._count_undispatched(self.reput.dispatched_offset)
        return stalled

    def _count_undispatched(self, from_offset: int) -> None:
        """Queue offsets already taken by records not dispatched yet: the next put continues
        after them, not after the last consume-queue entry."""
        queue_offsets = self.commitlog.queue_offsets

        def note(view, pos, _offset):
            request = request_from_record(view, pos, self._delay_levels, check_crc=False)
            if request.goes_to_consume_queue:
                key = (request.topic, request.queue_id)
                queue_offsets[key] = max(queue_offsets.get(key, 0), request.queue_offset + 1)

        recovery.replay(self.commitlog, from_offset, note)

    def _load_consume_queues(self) -> None:
        root = self.root / "consumequeue"
        if not root.exists():
            return
        for topic_dir in sorted(root.iterdir()):
            if not is_path_name(topic_dir.name):  # not made by this store: never opened as a queue
                log.warning("ignoring %s: not a topic name", topic_dir)
                continue
            for queue_dir in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
                if not queue_dir.name.isdigit():
                    continue
                queue = self._new_consume_queue(topic_dir.name, int(queue_dir.name))
                queue.load()
                queue.recover()
                self.consume_queues[(topic_dir.name, int(queue_dir.name))] = queue

    def _start_services(self, dispatch_loop: asyncio.AbstractEventLoop | None, stalled: bool) -> None:
        start = self.reput.dispatched_offset if stalled else self.commitlog.max_offset
        self.reput.start(start, dispatch_loop, stalled)
        cfg = self.config
        if cfg.sync_flush:
            self._group_commit = GroupCommitService(self.commitlog.flush, cfg.sync_flush_timeout)
            self._group_commit.start()
        else:
            flusher = PeriodicFlushService(self.commitlog.flush, cfg.flush_interval_commit_log)
            flusher.start()
            self._services.append(flusher)
        logic_flusher = PeriodicFlushService(
            self._flush_logics, cfg.flush_interval_consume_queue, "FlushLogics"
        )
        logic_flusher.start()
        self._services.append(logic_flusher)
        archiver = SegmentArchiver(cfg.archive_uri) if cfg.archive_uri else None
        if archiver is not None:
            self.archive_service = SealedSegmentArchiveService(self.commitlog, archiver)
            self.commitlog.on_segment_sealed = self.archive_service.segment_sealed
            self.archive_service.start()
            self._services.append(self.archive_service)
        self.clean_service = CleanService(self, cfg, self.clock, archiver)
        self.clean_service.start()
        self._services.append(self.clean_service)

    def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self._update_writable()
        self.reput.shutdown()
        for service in reversed(self._services):
            service.shutdown()
        if self._group_commit:
            self._group_commit.shutdown()
        self.commitlog.flush()
        try:
            self._flush_logics()
            clean = True
        except OSError as exc:  # the checkpoint could not be written (a full disk)
            log.error(
                "checkpoint not written at shutdown (%s): the next start recovers as after a crash", exc
            )
            clean = False
        self.commitlog.files.shutdown()
        for queue in list(self.consume_queues.values()):
            queue.shutdown()
        self.index.shutdown()
        if clean:
            self.abort_file.unlink(missing_ok=True)
            log.info("store at %s shut down cleanly", self.root)

    def _flush_logics(self) -> int:
        """Flush queues and index, then record in the checkpoint how far each is durable."""
        physic_ts, logics_ts = self._last_appended_ts, self._last_dispatched_ts
        self.commitlog.flush()
        for queue in list(self.consume_queues.values()):
            queue.flush()
        self.checkpoint.physic_msg_timestamp = physic_ts or self.checkpoint.physic_msg_timestamp
        self.checkpoint.logics_msg_timestamp = logics_ts or self.checkpoint.logics_msg_timestamp
        self.checkpoint.index_msg_timestamp = self.index.flush() or self.checkpoint.index_msg_timestamp
        self.checkpoint.flush()
        return 0

    # -- a full disk ---------------------------------------------------------------------------
    def _update_writable(self) -> None:
        # A slave's log is its master's bytes only (broker/store/replica.py): no put of its own.
        self._writable = self._running and self.running_flags.writeable and not self.config.is_slave

    def _disk_paths(self) -> dict[str, str]:
        return {
            "CL": str(self.commitlog.files.directory),
            "CQ": str(self.root / "consumequeue"),
            "INDEX": str(self.index.directory),
        }

    def check_disk(self) -> bool:
        """The clean service's check, every second: finish a stalled dispatch if the files it
        needs can be allocated now, then set or clear DISK_FULL. True while the disk is full."""
        with self._disk_check_lock:  # one resumed dispatch at a time, whoever asks
            if self.reput.stalled:
                self._resume_dispatch()
            return self.disk_guard.check()

    def not_writable_reason(self) -> str:
        """Why puts are refused now; "" while they are taken."""
        if self._writable:
            return ""
        if self._running and self.config.is_slave:
            return SLAVE_MODE_REASON
        return self.running_flags.reason() if self._running else "the store is not running"

    def _refused(self) -> PutMessageResult:
        if not self._running:
            self.disk_guard.measure()  # a rare answer: quote fresh figures
        return service_not_available(self.disk_guard.util_text(), self.not_writable_reason())

    @staticmethod
    def _part_of(error: SegmentAllocationError) -> str:
        return "INDEX" if error.path.parent.name == "index" else "CQ"

    def _dispatch_stalled(self, error: SegmentAllocationError, part: str) -> None:
        """Dispatch stopped at a record whose consume-queue entry or index keys have no file to
        go into: writes are refused (RocketMQ's WRITE_LOGICS_QUEUE_ERROR / WRITE_INDEX_FILE_ERROR)
        until the clean service's check has dispatched everything stored."""
        self.disk_guard.measure()
        what = "an index" if part == "INDEX" else "a consume-queue"
        reason = f"stored messages wait for {what} file, which cannot be allocated: {error}"
        self.running_flags.set(
            WRITE_INDEX_FILE_ERROR if part == "INDEX" else WRITE_LOGICS_QUEUE_ERROR, reason
        )

    def _resume_dispatch(self) -> None:
        try:
            self._redispatch()  # the bulk, while puts go on being refused
            with self.commitlog.lock:
                self._redispatch()  # what was appended meanwhile; no append can slip past
                self.reput.unstall()
        except SegmentAllocationError as exc:
            self._dispatch_stalled(exc, self._part_of(exc))
            return
        log.warning("dispatch caught up with the commit log at %d", self.reput.dispatched_offset)
        self.running_flags.clear(WRITE_LOGICS_QUEUE_ERROR)
        self.running_flags.clear(WRITE_INDEX_FILE_ERROR)

    def _redispatch(self) -> None:
        def apply(view, pos, _offset):
            self.reput.apply(request_from_record(view, pos, self._delay_levels, check_crc=False))

        recovery.replay(self.commitlog, self.reput.dispatched_offset, apply)

    # -- replication (broker/store/replica.py; the HA service is broker/store/ha) ----------------
    def replica_log(self) -> ReplicaLog:
        """A slave's writer of its master's bytes; made once, after recovery (``start``)."""
        if self._replica_log is None:
            self._replica_log = ReplicaLog(self)
        return self._replica_log

    def note_replicated(self, store_timestamp: int) -> None:
        """A replicated record's store time (the checkpoint's physic timestamp follows it)."""
        self._last_appended_ts = store_timestamp

    def commit_log_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` of the commit log from ``offset``, within one segment (what a
        master sends a slave); None when nothing is there yet."""
        mapped = self.commitlog.files.find_file(offset)
        if mapped is None:
            return None
        pos = offset - mapped.file_from_offset
        end = min(mapped.wrote_position, pos + max_bytes)
        return mapped.read(pos, end - pos) if end > pos else None

    # -- consume queues ----------------------------------------------------------------------
    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(
            self.root / "consumequeue", topic, queue_id, self.config.mapped_file_size_consume_queue
        )

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        queue = self.consume_queues.get((topic, queue_id))
        if queue is None and create:
            return self._consume_queue_for_write(topic, queue_id)
        return queue

    def _consume_queue_for_write(self, topic: str, queue_id: int) -> ConsumeQueue:
        with self._cq_lock:
            queue = self.consume_queues.get((topic, queue_id))
            if queue is None:
                queue = self._new_consume_queue(topic, queue_id)
                self.consume_queues[(topic, queue_id)] = queue
            return queue

    def _make_readable(self, request: DispatchRequest) -> None:
        """An appended message's consume-queue entry (what pulls read)."""
        if visible_to_consumers(request.sys_flag):
            queue = self.consume_queues.get((request.topic, request.queue_id))
            if queue is None:
                queue = self._consume_queue_for_write(request.topic, request.queue_id)
            queue.put(request.commitlog_offset, request.size, request.tags_code, request.queue_offset)
        self._last_dispatched_ts = request.store_timestamp

    def _index_keys(self, request: DispatchRequest) -> None:
        """An appended message's keys and unique id in the index (what key queries read)."""
        if (request.keys or request.unique_key) and self.config.message_index_enable:
            keys = request.keys.split(const.KEY_SEPARATOR) if request.keys else []
            self.index.build_index(
                request.topic, keys, request.unique_key, request.commitlog_offset, request.store_timestamp
            )

    def drop_consume_queue(self, key: tuple[str, int]) -> None:
        """Remove one queue and its files (a cut log tail was all it held)."""
        with self._cq_lock:
            queue = self.consume_queues.pop(key, None)
            self.commitlog.queue_offsets.pop(key, None)
        if queue is not None:
            queue.destroy()

    def add_dispatch_listener(self, listener: Callable[[DispatchRequest], None]) -> None:
        """Called after each message becomes readable, on the dispatch thread or loop."""
        self.reput.listeners.append(listener)

    def wait_for_dispatch(self, commitlog_offset: int | None = None, timeout: float | None = 10) -> bool:
        """Block until everything appended so far (or up to ``commitlog_offset``) is readable."""
        target = self.commitlog.max_offset if commitlog_offset is None else commitlog_offset
        return self.reput.wait_dispatched(target, timeout)

    # -- writing ------------------------------------------------------------------------------
    def _encode(self, msg: MessageExt) -> PendingRecord | PutMessageResult:
        """Validate and encode one message outside the commit-log lock (the hot path: keep lean)."""
        topic = msg.topic
        reason = topic_problem(topic)  # one set lookup for a name seen before
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

    def _append(self, messages: list[MessageExt]) -> PutMessageResult:
        if not self._writable:
            return self._refused()
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
            self.disk_guard.allocation_failed(exc)
            return create_mapped_file_failed(str(exc))
        except OSError as exc:
            log.exception("commit log append failed")
            return create_mapped_file_failed(str(exc))
        self._last_appended_ts = store_ts
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

    def _append_for_flush(self, batch: list[MessageExt]) -> tuple[PutMessageResult, int | None]:
        """Append; with SYNC_FLUSH also return the offset the caller must see flushed."""
        result = self._check_batch(batch) or self._append(batch)
        append = result.append
        if (
            not (result.ok and self._group_commit is not None and batch[0].wait_store_msg_ok)
            or append is None
        ):
            return result, None
        return result, append.wrote_offset + append.wrote_bytes

    @staticmethod
    def _flushed_result(result: PutMessageResult, flushed: bool) -> PutMessageResult:
        if not flushed:
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return result

    def put_message(self, msg: MessageExt) -> PutMessageResult:
        if self._group_commit is None:
            return self._append([msg])  # ASYNC_FLUSH: nothing to wait for, no batch to check
        return self.put_messages([msg])

    def put_messages(self, batch: list[MessageExt]) -> PutMessageResult:
        """Store a batch for one topic and queue: consecutive queue offsets, one append."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self._group_commit
        if flush_to is None or group_commit is None:
            return result
        try:
            flushed = group_commit.request(flush_to).result(self.config.sync_flush_timeout / 1000)
        except (concurrent.futures.TimeoutError, RuntimeError, OSError):
            flushed = False
        return self._flushed_result(result, flushed)

    async def put_message_async(self, msg: MessageExt) -> PutMessageResult:
        return await self.put_messages_async([msg])

    async def put_messages_async(self, batch: list[MessageExt]) -> PutMessageResult:
        """As ``put_messages``, but waits for a sync flush without blocking the event loop.

        The broker's own puts (delay, retry, transactions, replies, traces) come this way and do
        not wait for a SYNC_MASTER's slave: their callers take any status but PUT_OK as "not
        stored" and would put again; the records reach the slave all the same."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self._group_commit
        if flush_to is None or group_commit is None:
            return result
        return await self._after_flush(result, group_commit.request_async(flush_to))

    def put_messages_or_wait(self, batch: list[MessageExt]) -> PutMessageResult | Awaitable[PutMessageResult]:
        """Append on the event loop: the result, or — when a SYNC_FLUSH must be waited for — an
        awaitable of it. Callers that can answer at once then need no coroutine or task."""
        result, flush_to = self._append_for_flush(batch)
        group_commit = self._group_commit
        if self.replica_wait is not None:  # SYNC_MASTER: one attribute on every other put
            return self._replicated(result, batch, flush_to)
        if flush_to is None or group_commit is None:
            return result
        return self._after_flush(result, group_commit.request_async(flush_to))

    def _replicated(
        self, result: PutMessageResult, batch: list[MessageExt], flush_to: int | None
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """SYNC_MASTER (RocketMQ's handleDiskFlushAndHA): a stored message waiting for its store
        is answered once a slave has confirmed its end too, or with the slave's status."""
        append, replica_wait, group_commit = result.append, self.replica_wait, self._group_commit
        flushed = None
        if flush_to is not None and group_commit is not None:
            flushed = self._after_flush(result, group_commit.request_async(flush_to))
        if not result.ok or append is None or not batch[0].wait_store_msg_ok or replica_wait is None:
            return result if flushed is None else flushed
        confirmed = replica_wait(append.wrote_offset + append.wrote_bytes)
        if flushed is None and isinstance(confirmed, PutMessageStatus):
            return self._replica_result(result, confirmed)
        return self._after_flush_and_replica(result, flushed, confirmed)

    @staticmethod
    def _replica_result(result: PutMessageResult, status: PutMessageStatus) -> PutMessageResult:
        if status is not PutMessageStatus.PUT_OK:  # the slave's status wins, as in RocketMQ
            result.status = status
        return result

    async def _after_flush_and_replica(
        self, result: PutMessageResult, flushed, confirmed
    ) -> PutMessageResult:
        if flushed is not None:
            result = await flushed
        status = confirmed if isinstance(confirmed, PutMessageStatus) else await confirmed
        return self._replica_result(result, status)

    def dispatch_pending(self) -> None:
        """Make what was appended readable now (on the dispatch loop), not at its next turn."""
        self.reput.dispatch_pending()

    async def _after_flush(self, result: PutMessageResult, flushed_future) -> PutMessageResult:
        try:
            flushed = await flushed_future
        except (RuntimeError, OSError):
            flushed = False
        return self._flushed_result(result, flushed)

    @staticmethod
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

    # -- reading ------------------------------------------------------------------------------
    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_count: int, message_filter=None
    ) -> GetMessageResult:
        queue = self.find_consume_queue(topic, queue_id)
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
        read = self.commitlog.read
        messages, offsets = result.messages, result.queue_offsets
        size_total = 0
        next_offset = offset
        removed = False
        for phy, size, tags_code in entries:
            if len(messages) >= max_count or (messages and size_total + size > max_bytes):
                break
            next_offset += 1
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                continue
            record = read(phy, size)
            if record is None:
                removed = True
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(record):
                continue
            messages.append(record)
            offsets.append(next_offset - 1)
            size_total += size
        result.next_begin_offset = next_offset
        if messages:
            result.status = GetMessageStatus.FOUND
        elif removed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        elif entries:
            result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_FOUND_NULL, offset

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        return queue.max_offset if queue else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        return queue.min_offset if queue else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        return entry[0] if entry else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        return self._store_time_of(entry[0], entry[1]) if entry else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        return self.get_message_store_timestamp(topic, queue_id, queue.min_offset) if queue else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
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

    def select_one_message_by_offset(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        size = size or self.commitlog.record_size_at(commitlog_offset)
        return self.commitlog.read(commitlog_offset, size) if size else None

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        record = self.select_one_message_by_offset(commitlog_offset)
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

    # -- administration ---------------------------------------------------------------------
    @property
    def min_physic_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_physic_offset(self) -> int:
        return self.commitlog.max_offset

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.consume_queues}

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in self.consume_queues if t == topic)

    def delete_topics(self, topics: set[str]) -> int:
        """Drop the consume queues of ``topics`` (the commit log ages out on its own)."""
        removed = 0
        with self._cq_lock:
            for key in [k for k in self.consume_queues if k[0] in topics]:
                self.consume_queues.pop(key).destroy()
                self.commitlog.queue_offsets.pop(key, None)
                removed += 1
        for topic in topics:
            try:
                topic_dir = name_path(self.root / "consumequeue", topic)
            except IllegalName:
                continue  # never a queue of ours: nothing to remove, and no path outside the store
            if topic_dir.exists() and not any(topic_dir.iterdir()):
                topic_dir.rmdir()
        return removed

    def earliest_message_time(self) -> int:
        """Store time of the oldest message in the commit log; -1 when it holds none."""
        offset = self.commitlog.min_offset
        size = self.commitlog.record_size_at(offset) if offset < self.commitlog.max_offset else None
        return self._store_time_of(offset, size) if size else -1

    def runtime_info(self) -> dict[str, str]:
        # A directory not made yet (no topic has a queue) is on the store root's disk.
        commitlog_dir, queue_dir = (
            str(path if path.exists() else self.root)
            for path in (self.commitlog.files.directory, self.root / "consumequeue")
        )
        return {
            "commitLogDiskRatio": str(disk_used_fraction(commitlog_dir)),
            "consumeQueueDiskRatio": str(disk_used_fraction(queue_dir)),
            "commitLogDirCapacity": capacity_text(commitlog_dir),
            "earliestMessageTimeStamp": str(self.earliest_message_time()),
            "commitLogMinOffset": str(self.commitlog.min_offset),
            "commitLogMaxOffset": str(self.commitlog.max_offset),
            "dispatchBehindBytes": str(self.commitlog.max_offset - self.reput.dispatched_offset),
            "putMessageTimesTotal": str(self.put_count),
            "putMessageSizeTotal": str(self.put_size),
            "putMessageAverageSize": str(self.put_size / self.put_count if self.put_count else 0.0),
            "remainHowManyDataToFlush": human_bytes(self.commitlog.files.unflushed_bytes),
            # How long the put in progress has held the commit log: puts run on the loop that
            # answers this, so none is ever in progress when it is asked.
            "pageCacheLockTimeMills": "0",
            "getMessageTransferedMsgCount": str(self.get_count),
            "bootTimestamp": str(self.boot_timestamp),
            "flushDiskType": self.config.flush_disk_type,
            # Why puts are refused, if they are: RocketMQ's RunningFlags word, DISK_FULL alone
            # (the disk check's verdict), and the reason in words ("" while writes are taken).
            "runningFlags": str(self.running_flags.bits),
            "diskFull": str(self.running_flags.is_set(DISK_FULL)).lower(),
            "storeWritable": str(self._writable).lower(),
            "storeNotWritableReason": self.not_writable_reason(),
        }
