"""Whether the store takes puts now, and why not when it does not.

One flag is what a put reads (``writable``): the store is running, no ``RunningFlags`` write bit
is set and it is not a slave's store. A full disk refuses writes and nothing else: the disk
guard sets DISK_FULL and clears it when space returns; a dispatch that stopped at a consume-queue
or index file that cannot be allocated sets WRITE_LOGICS_QUEUE_ERROR / WRITE_INDEX_FILE_ERROR
until the clean service's disk check has dispatched everything stored (``check_disk``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from . import recovery
from .commitlog import CommitLog
from .disk_guard import DiskGuard
from .dispatch import ReputService, request_from_record
from .mapped_file import SegmentAllocationError
from .results import PutMessageResult, refused_for_role, service_not_available
from .running_flags import (
    DISK_FULL,
    NOT_WRITEABLE,
    WRITE_INDEX_FILE_ERROR,
    WRITE_LOGICS_QUEUE_ERROR,
    RunningFlags,
)
from .store_config import MessageStoreConfig

log = logging.getLogger(__name__)
# RocketMQ's words for a put refused by a slave's store (DefaultMessageStore.checkStoreStatus).
SLAVE_MODE_REASON = "message store is slave mode, so write is not supported"


def stalled_part(error: SegmentAllocationError) -> str:
    """Which of the dispatch's files could not be allocated: "INDEX" or "CQ"."""
    return "INDEX" if error.path.parent.name == "index" else "CQ"


class StoreWritability:
    def __init__(
        self,
        config: MessageStoreConfig,
        commitlog: CommitLog,
        reput: ReputService,
        disk_paths: Callable[[], dict[str, str]],
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.reput = reput
        self._delay_levels = config.delay_levels_ms()
        self.running = False
        # The one thing a put checks: running and no RunningFlags write bit set.
        self.writable = False
        self.running_flags = RunningFlags(on_change=self.update)
        self.disk_guard = DiskGuard(config, self.running_flags, disk_paths)
        self._disk_check_lock = threading.Lock()
        reput.on_stall = self.dispatch_stalled

    def update(self) -> None:
        # A slave's log is its master's bytes only (broker/store/replica.py): no put of its own.
        self.writable = self.running and self.running_flags.writeable and not self.config.is_slave

    def set_running(self, running: bool) -> None:
        self.running = running
        self.update()

    def not_writable_reason(self) -> str:
        """Why puts are refused now; "" while they are taken."""
        if self.writable:
            return ""
        if self.running and self.config.is_slave:
            return SLAVE_MODE_REASON
        return self.running_flags.reason() if self.running else "the store is not running"

    def refused(self) -> PutMessageResult:
        if not self.running:
            self.disk_guard.measure()  # a rare answer: quote fresh figures
        elif not self.config.is_slave and self.running_flags.only(NOT_WRITEABLE):
            return refused_for_role(self.running_flags.reason())  # set by controller mode alone
        return service_not_available(self.disk_guard.util_text(), self.not_writable_reason())

    def disk_full(self) -> bool:
        """Whether the disk guard has found the disk full (a flag read: cheap on every request)."""
        return self.running_flags.is_set(DISK_FULL)

    def disk_full_refusal(self, cause: str = "") -> str:
        """The remark refusing a write of the broker's own files (a topic, a group, an offset
        commit) as a put is refused: while the disk guard has found the disk full, or with
        ``cause`` when such a file could not be written; "" when neither holds. Only the disk
        counts: a slave or a stalled dispatch still keeps its tables."""
        if not cause and not self.disk_full():
            return ""
        self.disk_guard.measure()  # a rare answer: quote fresh figures
        return service_not_available(self.disk_guard.util_text(), cause or self.running_flags.reason()).remark

    def check_disk(self) -> bool:
        """The clean service's check, every second: finish a stalled dispatch if the files it
        needs can be allocated now, then set or clear DISK_FULL. True while the disk is full."""
        with self._disk_check_lock:  # one resumed dispatch at a time, whoever asks
            if self.reput.stalled:
                self._resume_dispatch()
            return self.disk_guard.check()

    def dispatch_stalled(self, error: SegmentAllocationError, part: str) -> None:
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
            self.dispatch_stalled(exc, stalled_part(exc))
            return
        log.warning("dispatch caught up with the commit log at %d", self.reput.dispatched_offset)
        self.running_flags.clear(WRITE_LOGICS_QUEUE_ERROR)
        self.running_flags.clear(WRITE_INDEX_FILE_ERROR)

    def _redispatch(self) -> None:
        def apply(view, pos, _offset):
            self.reput.apply(request_from_record(view, pos, self._delay_levels, check_crc=False))

        recovery.replay(self.commitlog, self.reput.dispatched_offset, apply)
