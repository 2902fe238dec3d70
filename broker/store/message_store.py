"""``MessageStore``: the broker's storage engine, shaped like RocketMQ's DefaultMessageStore.

Appends go to the commit log under one lock; a background thread dispatches each record to its
consume queue and the index; readers address messages by (topic, queue, logical offset) and get
the raw stored records back, ready to send in a pull response.

This class is the store's one face to its callers and its life cycle (recover, start the
services, shut down); each job has a module of its own:

- ``store_writer``: puts (encode, append, answer after a SYNC_FLUSH / a SYNC_MASTER's slave);
- ``store_reader``: gets, queue bounds, store times, lookups by offset and key;
- ``store_writability``: whether puts are taken and why not. A full disk refuses writes and
  nothing else (``running_flags``, ``disk_guard``): every segment's blocks are reserved before it
  is mapped, a put reads one flag, and the store takes writes again by itself when space returns
  — including after a start on a full disk;
- ``store_replication``: what replication needs of the store (broker/store/ha, replica.py);
- ``consume_queue_table``: the consume queues by topic and queue id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, record_damage

from . import recovery
from .archive import SegmentArchiver
from .archive_service import SealedSegmentArchiveService
from .checkpoint import StoreCheckpoint
from .clean_service import CleanService
from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .consume_queue_table import ConsumeQueueTable
from .disk import capacity_text, disk_used_fraction, human_bytes
from .disk_guard import DiskGuard
from .dispatch import DispatchRequest, ReputService, request_from_record
from .flush import GroupCommitService, PeriodicFlushService
from .index import IndexService
from .mapped_file import SegmentAllocationError
from .quarantine import CommitLogQuarantine, DamagedRange
from .replica import ReplicaLog
from .results import GetMessageResult, PutMessageResult
from .running_flags import DISK_FULL, RunningFlags
from .store_config import MessageStoreConfig
from .store_reader import StoreReader
from .store_replication import ReplicaWait, StoreReplication
from .store_writability import StoreWritability, stalled_part
from .store_writer import StoreWriter

log = logging.getLogger(__name__)


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
        self.queues = ConsumeQueueTable(self.root, self.config, self.commitlog)
        self.index = IndexService(
            self.root / "index", self.config.max_hash_slot_num, self.config.max_index_num
        )
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.quarantine = CommitLogQuarantine(
            self.root / "config" / "damagedCommitLog.json", self.commitlog, clock
        )
        self.reput = ReputService(self.queues.make_readable, self._index_keys)
        self._delay_levels = self.config.delay_levels_ms()
        self._services: list = []
        self.archive_service: SealedSegmentArchiveService | None = None
        self.writability = StoreWritability(self.config, self.commitlog, self.reput, self._disk_paths)
        self.replication = StoreReplication(self.commitlog, lambda: ReplicaLog(self), self._note_appended)
        self.writer = StoreWriter(self.config, self.commitlog, self.reput, self.writability, self.replication)
        self.reader = StoreReader(self.config, self.commitlog, self.queues, self.index, self.quarantine)
        self.last_exit_ok = True
        self.boot_timestamp = int(clock() * 1000)

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
        self.writability.running = True
        self.check_disk()
        self.writability.update()
        log.info("store at %s started (last exit %s)", self.root, "clean" if self.last_exit_ok else "UNCLEAN")

    def _load_and_recover(self) -> bool:
        """Load and recover; True when not everything could be dispatched (a full disk: the
        clean service's disk check dispatches the rest once space returns)."""
        self.commitlog.files.load()
        self.quarantine.load()
        self.queues.load()
        self.index.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)
        min_ts = self.checkpoint.min_timestamp(index_safe=self.config.message_index_enable)
        end, verified_from = recovery.recover_commitlog(
            self.commitlog, self.last_exit_ok, min_ts, self.checkpoint.physic_flushed_offset, self.quarantine,
            str(self.checkpoint.path),
        )  # fmt: skip
        self.quarantine.drop_beyond(end)
        for queue in self.consume_queues.values():
            queue.truncate_dirty(end)
        self.index.truncate_beyond(end)
        start = recovery.reput_start(self.commitlog, list(self.consume_queues.values()))
        if not self.last_exit_ok:
            start = min(start, verified_from)

        def apply(view, pos, offset):
            # A record whose header or body is damaged is not dispatched (to a wrong queue, or
            # at all): replay quarantines it and its queue offset gets a blank entry.
            damage = record_damage(view, pos, offset)
            if damage is not None:
                raise MessageDecodeError(damage)
            request = request_from_record(view, pos, self._delay_levels, check_crc=False)
            self.reput.dispatch_now(request)

        self.reput.dispatched_offset = start
        stalled = False
        try:
            recovery.replay(self.commitlog, start, apply, quarantine=self.quarantine)
        except SegmentAllocationError as exc:
            stalled = True
            self.writability.dispatch_stalled(exc, stalled_part(exc))
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

        recovery.replay(self.commitlog, from_offset, note, quarantine=self.quarantine)

    def _start_services(self, dispatch_loop: asyncio.AbstractEventLoop | None, stalled: bool) -> None:
        start = self.reput.dispatched_offset if stalled else self.commitlog.max_offset
        self.reput.start(start, dispatch_loop, stalled)
        cfg = self.config
        if cfg.sync_flush:
            self.writer.group_commit = GroupCommitService(self.commitlog.flush, cfg.sync_flush_timeout)
            self.writer.group_commit.start()
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
        if not self.writability.running:
            return
        self.writability.set_running(False)
        self.reput.shutdown()
        for service in reversed(self._services):
            service.shutdown()
        if self.writer.group_commit:
            self.writer.group_commit.shutdown()
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
        self.queues.shutdown()
        self.index.shutdown()
        if clean:
            self.abort_file.unlink(missing_ok=True)
            log.info("store at %s shut down cleanly", self.root)

    def _flush_logics(self) -> int:
        """Flush queues and index, then record in the checkpoint how far each is durable."""
        physic_ts, logics_ts = self.writer.last_appended_ts, self.queues.last_dispatched_ts
        self.checkpoint.physic_flushed_offset = self.commitlog.flush()
        self.queues.flush()
        self.checkpoint.physic_msg_timestamp = physic_ts or self.checkpoint.physic_msg_timestamp
        self.checkpoint.logics_msg_timestamp = logics_ts or self.checkpoint.logics_msg_timestamp
        self.checkpoint.index_msg_timestamp = self.index.flush() or self.checkpoint.index_msg_timestamp
        self.checkpoint.flush()
        return 0

    def _disk_paths(self) -> dict[str, str]:
        return {
            "CL": str(self.commitlog.files.directory),
            "CQ": str(self.queues.directory),
            "INDEX": str(self.index.directory),
        }

    def _note_appended(self, store_timestamp: int) -> None:
        self.writer.last_appended_ts = store_timestamp

    def _index_keys(self, request: DispatchRequest) -> None:
        """An appended message's keys and unique id in the index (what key queries read)."""
        if (request.keys or request.unique_key) and self.config.message_index_enable:
            keys = request.keys.split(const.KEY_SEPARATOR) if request.keys else []
            self.index.build_index(
                request.topic, keys, request.unique_key, request.commitlog_offset, request.store_timestamp
            )

    # -- writability (store_writability) ---------------------------------------------------------
    @property
    def running_flags(self) -> RunningFlags:
        return self.writability.running_flags

    @property
    def disk_guard(self) -> DiskGuard:
        return self.writability.disk_guard

    def check_disk(self) -> bool:
        return self.writability.check_disk()

    def not_writable_reason(self) -> str:
        return self.writability.not_writable_reason()

    def disk_full(self) -> bool:
        return self.writability.disk_full()

    def disk_full_refusal(self, cause: str = "") -> str:
        return self.writability.disk_full_refusal(cause)

    # -- replication (store_replication; the HA service is broker/store/ha) -----------------------
    @property
    def replica_wait(self) -> ReplicaWait | None:
        return self.replication.replica_wait

    @replica_wait.setter
    def replica_wait(self, wait: ReplicaWait | None) -> None:
        self.replication.replica_wait = wait

    def replica_log(self) -> ReplicaLog:
        return self.replication.replica_log()

    def note_replicated(self, store_timestamp: int) -> None:
        self.replication.note_replicated(store_timestamp)

    def commit_log_data(self, offset: int, max_bytes: int) -> bytes | None:
        data = self.replication.commit_log_data(offset, max_bytes)
        if data and (offset + len(data)) % self.commitlog.file_size == 0:
            # A sealed segment's end goes to a slave: its seal may have gone bad since start-up
            # (cheap: its last non-zero bytes are read), and it is sent well-formed if so.
            mapped = self.commitlog.files.find_file(offset)
            if mapped is not None:
                recovery.check_seal(mapped, self.quarantine)
        return self.quarantine.transfer_bytes(offset, data) if data else data

    # -- consume queues (consume_queue_table) -----------------------------------------------------
    @property
    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return self.queues.queues

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        return self.queues.find(topic, queue_id, create)

    def drop_consume_queue(self, key: tuple[str, int]) -> None:
        self.queues.drop(key)

    def topics(self) -> set[str]:
        return self.queues.topics()

    def queue_ids(self, topic: str) -> list[int]:
        return self.queues.queue_ids(topic)

    def delete_topics(self, topics: set[str]) -> int:
        return self.queues.delete_topics(topics)

    def add_dispatch_listener(self, listener: Callable[[DispatchRequest], None]) -> None:
        """Called after each message becomes readable, on the dispatch thread or loop."""
        self.reput.listeners.append(listener)

    def wait_for_dispatch(self, commitlog_offset: int | None = None, timeout: float | None = 10) -> bool:
        """Block until everything appended so far (or up to ``commitlog_offset``) is readable."""
        target = self.commitlog.max_offset if commitlog_offset is None else commitlog_offset
        return self.reput.wait_dispatched(target, timeout)

    def dispatch_pending(self) -> None:
        """Make what was appended readable now (on the dispatch loop), not at its next turn."""
        self.reput.dispatch_pending()

    # -- writing (store_writer) -------------------------------------------------------------------
    def put_message(self, msg: MessageExt) -> PutMessageResult:
        return self.writer.put_message(msg)

    def put_messages(self, batch: list[MessageExt]) -> PutMessageResult:
        return self.writer.put_messages(batch)

    async def put_message_async(self, msg: MessageExt) -> PutMessageResult:
        return await self.writer.put_messages_async([msg])

    async def put_messages_async(self, batch: list[MessageExt]) -> PutMessageResult:
        return await self.writer.put_messages_async(batch)

    def put_messages_or_wait(self, batch: list[MessageExt]) -> PutMessageResult | Awaitable[PutMessageResult]:
        return self.writer.put_messages_or_wait(batch)

    @property
    def put_count(self) -> int:
        return self.writer.put_count

    @property
    def put_size(self) -> int:
        return self.writer.put_size

    # -- reading (store_reader) -------------------------------------------------------------------
    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_count: int, message_filter=None
    ) -> GetMessageResult:
        return self.reader.get_message(group, topic, queue_id, offset, max_count, message_filter)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        return self.reader.get_commit_log_offset_in_queue(topic, queue_id, offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        return self.reader.get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.reader.get_earliest_message_time(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.reader.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def store_timestamp_at(self, commitlog_offset: int) -> int:
        return self.reader.store_timestamp_at(commitlog_offset)

    def earliest_message_time(self) -> int:
        return self.reader.earliest_message_time()

    def select_one_message_by_offset(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        return self.reader.select_one_message_by_offset(commitlog_offset, size)

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        return self.reader.look_message_by_offset(commitlog_offset)

    def record_starting_at(self, commitlog_offset: int) -> bytes | None:
        return self.reader.record_starting_at(commitlog_offset)

    def message_starting_at(self, commitlog_offset: int) -> MessageExt | None:
        return self.reader.message_starting_at(commitlog_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> list[MessageExt]:
        return self.reader.query_message(topic, key, max_num, begin_ms, end_ms)

    @property
    def get_count(self) -> int:
        return self.reader.get_count

    @property
    def get_found_count(self) -> int:
        return self.reader.get_found_count

    @property
    def get_miss_count(self) -> int:
        return self.reader.get_miss_count

    # -- administration ---------------------------------------------------------------------
    @property
    def min_physic_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_physic_offset(self) -> int:
        return self.commitlog.max_offset

    def runtime_info(self) -> dict[str, str]:
        # A directory not made yet (no topic has a queue) is on the store root's disk.
        commitlog_dir, queue_dir = (
            str(path if path.exists() else self.root)
            for path in (self.commitlog.files.directory, self.queues.directory)
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
            "storeWritable": str(self.writability.writable).lower(),
            "storeNotWritableReason": self.not_writable_reason(),
            # Quarantined damaged data (open ranges): counts, and the first ranges as JSON.
            **self.quarantine.runtime_info(),
        }

    def purge_damaged_commit_log(self, from_offset: int | None = None) -> list[DamagedRange]:
        """Overwrite quarantined damaged data (every open range, or the one starting at
        ``from_offset``) with filler every walker passes, and close the entries."""
        return self.quarantine.purge(from_offset)
