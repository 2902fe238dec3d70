"""Getting commit-log bytes onto the disk.

ASYNC_FLUSH: a thread msyncs every ``flush_interval_commit_log`` ms; writers never wait.
SYNC_FLUSH (group commit): writers hand in "flush up to offset X" requests and wait; the flush
thread takes every request queued so far, syncs once up to the highest offset, and completes
them all — so N concurrent writers share one fsync instead of paying for N.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

log = logging.getLogger(__name__)


class PeriodicFlushService:
    """ASYNC_FLUSH: flush on a timer (and once more at shutdown)."""

    def __init__(
        self, flush: Callable[[], int], interval_ms: int, name: str = "FlushRealTimeService"
    ) -> None:
        self._flush = flush
        self._interval = interval_ms / 1000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._flush()
            except Exception:
                log.exception("periodic flush failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._flush()


class GroupCommitService:
    """SYNC_FLUSH: futures completed once the log is durable up to their offset."""

    def __init__(self, flush: Callable[[], int]) -> None:
        self._flush = flush
        self._requests: list[tuple[int, Future]] = []
        self._cond = threading.Condition()
        self._stopped = False
        self.flushed_offset = 0
        self._thread = threading.Thread(target=self._run, name="GroupCommitService", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, end_offset: int) -> Future:
        future: Future = Future()
        with self._cond:
            if self._stopped:
                future.set_exception(RuntimeError("the store is shutting down"))
                return future
            self._requests.append((end_offset, future))
            self._cond.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requests or self._stopped)
                batch, self._requests = self._requests, []
                if self._stopped and not batch:
                    return
            self._complete(batch)

    def _complete(self, batch: list[tuple[int, Future]]) -> None:
        try:
            self.flushed_offset = self._flush()
            error = None
        except Exception as exc:  # a failed fsync must fail the writers, not hang them
            log.exception("group commit flush failed")
            error = exc
        for end_offset, future in batch:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(self.flushed_offset >= end_offset)

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
