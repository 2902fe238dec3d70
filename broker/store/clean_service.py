"""Retention in motion: archive, then delete, expired commit-log segments; then the consume
queue and index files that only pointed into them. The same thread checks the disk every second
(``MessageStore.check_disk``): writes are refused while it is full and taken again once it is
not, and a disk that has just become full gets a retention pass at once instead of at the next
``cleanResourceInterval``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .archive import SegmentArchiver
from .disk import disk_used_percent
from .disk_guard import DISK_CHECK_INTERVAL_S
from .retention import RetentionPolicy, SegmentInfo
from .store_config import MessageStoreConfig

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger(__name__)


class CleanService:
    def __init__(
        self,
        store: MessageStore,
        config: MessageStoreConfig,
        clock: Callable[[], float],
        archiver: SegmentArchiver | None = None,
    ) -> None:
        self.store = store
        # Read on every pass, not copied: fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio,
        # cleanResourceInterval and deleteFilesBatchMax change on a running broker.
        self.config = config
        self.clock = clock
        # Archive-before-delete: the safety net behind archive-on-seal (archive_service).
        self.archiver = archiver
        self.disk_usage: Callable[[str], float] = disk_used_percent
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="CleanCommitLogService", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def policy(self) -> RetentionPolicy:
        config = self.config
        return RetentionPolicy(
            config.file_reserved_time,
            config.delete_when,
            config.disk_max_used_space_ratio,
            clock=self.clock,
            max_per_run=config.delete_files_batch_max,
            clean_forcibly=config.clean_file_forcibly_enable,
        )

    def _run(self) -> None:
        interval_s = self.config.clean_resource_interval / 1000
        last_pass = time.monotonic()
        disk_full = False
        while not self._stop.wait(min(DISK_CHECK_INTERVAL_S, interval_s)):
            was_full = disk_full
            try:
                disk_full = self.store.check_disk()
            except Exception:
                log.exception("disk check failed")
            interval_s = self.config.clean_resource_interval / 1000
            newly_full = disk_full and not was_full
            if newly_full or time.monotonic() - last_pass >= interval_s:
                last_pass = time.monotonic()
                try:
                    self.run_once()
                except Exception:
                    log.exception("retention pass failed")

    def segments(self) -> list[SegmentInfo]:
        files = self.store.commitlog.files.files
        return [
            SegmentInfo(str(m.path), m.file_from_offset, m.file_size, m.last_modified_ms(), m is files[-1])
            for m in list(files)
        ]

    def run_once(self) -> list[str]:
        """One pass; returns the names of the deleted segments."""
        with self._lock:
            store = self.store
            policy = self.policy
            expired = policy.select_expired(
                self.segments(), policy.now_ms(), self.disk_usage(str(store.root))
            )
            if not expired:
                return []
            if self.archiver is not None:
                for segment in expired:
                    self.archiver.archive(segment.path)  # an archive failure keeps the segment
            removed = store.commitlog.files.delete_first(len(expired))
            min_offset = store.commitlog.min_offset
            for queue in list(store.consume_queues.values()):
                queue.delete_expired(min_offset)
            store.index.delete_expired(min_offset)
            names = [m.path.name for m in removed]
            log.info("retention removed commit-log segments %s", names)
            return names

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
