"""Archive on seal: each commit-log segment is copied to the archive soon after the log rolls
past it, not only when retention is about to delete it (72 h later by default), so the analytics
jobs read recent traffic.

The roll happens under the commit-log lock on the path of every put: the log only raises a flag
here (``segment_sealed``) and a thread of this service does the copying. At start the thread
archives every sealed segment the archive lacks, so segments sealed while the broker was down
(or while the archive was unwritable) are caught up. Retention still archives before it deletes,
as a safety net; both go through the same ``SegmentArchiver``, which skips a segment it has.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .archive import SegmentArchiver

if TYPE_CHECKING:
    from .commitlog import CommitLog
    from .mapped_file import MappedFile

log = logging.getLogger(__name__)
# After a failed copy (archive disk full, unmounted …) the next attempt comes this much later.
RETRY_INTERVAL_S = 30.0


class SealedSegmentArchiveService:
    def __init__(self, commitlog: CommitLog, archiver: SegmentArchiver,
                 retry_interval_s: float = RETRY_INTERVAL_S) -> None:  # fmt: skip
        self.commitlog = commitlog
        self.archiver = archiver
        self.retry_interval_s = retry_interval_s
        self._archived: set[str] = set()  # names known to be in the archive
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="SealedSegmentArchiver", daemon=True)

    def segment_sealed(self, _mapped: MappedFile) -> None:
        """The commit log rolled past a segment (called under its lock: only wake the thread)."""
        self._wake.set()

    def start(self) -> None:
        self._wake.set()  # the start-up catch-up
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.retry_interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.archive_sealed()
            except Exception:
                log.exception("archiving sealed commit-log segments failed; retrying in %gs",
                              self.retry_interval_s)  # fmt: skip

    def sealed_segments(self) -> list[MappedFile]:
        """Every segment the log will not write again: all but the last, and the last when full."""
        files = list(self.commitlog.files.files)
        if files and not files[-1].is_full:
            files.pop()
        return files

    def archive_sealed(self) -> list[str]:
        """Copy the sealed segments the archive lacks; return their names."""
        pending = [m for m in self.sealed_segments() if m.path.name not in self._archived]
        if not pending:
            return []
        # What the archive holds must be durable in the log first: a crash must not leave the
        # archive with records the recovered log does not have.
        self.commitlog.flush()
        copied = []
        for mapped in pending:
            name = mapped.path.name
            if self.archiver.has_copy_of(mapped.path):
                self._archived.add(name)
                continue
            try:
                self.archiver.archive(mapped.path)
            except FileNotFoundError:
                # Retention deleted it meanwhile, and archived it itself before doing so.
                continue
            self._archived.add(name)
            copied.append(name)
        if copied:
            log.info("archived sealed commit-log segments %s to %s", copied, self.archiver.root)
        return copied

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
