"""Getting commit-log bytes onto the disk.

ASYNC_FLUSH: a thread msyncs every ``flush_interval_commit_log`` ms; writers never wait.
SYNC_FLUSH (group commit): writers hand in "flush up to offset X" requests and wait; the flush
thread takes every request queued so far, syncs once up to the highest offset, and completes
them all — so N concurrent writers share one fsync instead of paying for N.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
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
        # A failed last flush (a full disk) must not stop the store's shutdown half-way: the store
        # flushes once more itself and, if that fails too, leaves the abort file for recovery.
        try:
            self._flush()
        except OSError:
            log.exception("flush at shutdown failed")


class GroupCommitService:
    """SYNC_FLUSH: requests completed once the log is durable up to their offset.

    Threads wait on ``concurrent.futures.Future``s; an asyncio writer gets an asyncio future
    that the flush thread settles with one ``call_soon_threadsafe`` per flush for its whole
    loop — no timer and no thread hop per message. A request whose flush finished later than
    ``timeout_ms`` after it was made completes with False (FLUSH_DISK_TIMEOUT).
    """

    def __init__(self, flush: Callable[[], int], timeout_ms: int = 5000) -> None:
        self._flush = flush
        self._timeout = timeout_ms / 1000
        self._requests: list[
            tuple[int, float, Future | asyncio.Future, asyncio.AbstractEventLoop | None]
        ] = []
        self._cond = threading.Condition()
        self._stopped = False
        self.flushed_offset = 0
        self._thread = threading.Thread(target=self._run, name="GroupCommitService", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, end_offset: int) -> Future:
        future: Future = Future()
        self._enqueue(end_offset, future, None)
        return future

    def request_async(self, end_offset: int) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._enqueue(end_offset, future, loop)
        return future

    def _enqueue(self, end_offset: int, future, loop) -> None:
        with self._cond:
            if self._stopped:
                error = RuntimeError("the store is shutting down")
                future.set_exception(error)
                return
            self._requests.append((end_offset, time.monotonic(), future, loop))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requests or self._stopped)
                batch, self._requests = self._requests, []
                if self._stopped and not batch:
                    return
            self._complete(batch)

    def _complete(self, batch) -> None:
        try:
            self.flushed_offset = self._flush()
            error = None
        except Exception as exc:  # a failed fsync must fail the writers, not hang them
            log.exception("group commit flush failed")
            error = exc
        done = time.monotonic()
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for end_offset, made, future, loop in batch:
            outcome = error or (self.flushed_offset >= end_offset and done - made <= self._timeout)
            if loop is None:
                _settle(future, outcome)
            else:
                by_loop.setdefault(loop, []).append((future, outcome))
        for loop, settled in by_loop.items():
            loop.call_soon_threadsafe(_settle_all, settled)

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _settle(future, outcome) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _settle_all(settled: list) -> None:
    for future, outcome in settled:
        _settle(future, outcome)
