"""What the consume queues and the index learn of each appended message, and the thread
that tells them — in commit-log order, so a reader never sees offset N+1 before N."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from broker.common import message_const as const
from broker.common.java_hash import tag_hash_code
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.sysflag import visible_to_consumers
from broker.common.topic_config import SCHEDULE_TOPIC

from .mapped_file import SegmentAllocationError

log = logging.getLogger(__name__)


class DispatchRequest(NamedTuple):
    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str | None
    unique_key: str | None
    sys_flag: int
    properties: dict[str, str]

    @property
    def goes_to_consume_queue(self) -> bool:
        """Prepared and rolled-back transaction messages stay out of consume queues."""
        return visible_to_consumers(self.sys_flag)


def compute_tags_code(
    topic: str, properties: dict[str, str], store_timestamp: int, delay_levels_ms: list[int]
) -> int:
    """Tag hash for normal topics; for the schedule topic the delivery time (RocketMQ's trick
    that lets the delay service scan a consume queue by due time)."""
    if topic == SCHEDULE_TOPIC:
        level = int(properties.get(const.PROPERTY_DELAY_TIME_LEVEL, "0") or 0)
        if level > 0 and delay_levels_ms:
            return store_timestamp + delay_levels_ms[min(level, len(delay_levels_ms)) - 1]
        return store_timestamp
    return tag_hash_code(properties.get(const.PROPERTY_TAGS))


def request_from_record(buf, pos: int, delay_levels_ms: list[int], check_crc: bool) -> DispatchRequest:
    """Rebuild the dispatch request of a stored record (recovery path)."""
    msg = decode_message(buf, pos, read_body=check_crc, check_crc=check_crc)
    props = msg.properties
    return DispatchRequest(
        msg.topic, msg.queue_id, msg.commitlog_offset, msg.store_size,
        compute_tags_code(msg.topic, props, msg.store_timestamp, delay_levels_ms),
        msg.store_timestamp, msg.queue_offset, props.get(const.PROPERTY_KEYS),
        props.get(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), msg.sys_flag, props,
    )  # fmt: skip


class ReputService:
    """Applies dispatch requests to consume queues and the index, in commit order.

    Each request is applied in three steps: ``make_readable`` (its consume-queue entry), the
    listeners (held pulls waiting for it), then ``index`` (its keys). Waking a consumer does not
    wait for the index: a key query cannot run before the step that follows in the same turn.

    Requests are queued by the append path under the commit-log lock, so the deque already
    holds them in commit order. By default a background thread drains it in batches; a broker
    passes its event loop instead, and the loop drains it after the handlers that appended:
    no thread hand-off (and GIL switch) per message, and held pulls are woken directly.

    When a consume-queue or index file cannot be allocated (the disk is full), dispatch stops at
    that record (``stalled``) instead of skipping it: the record is in the commit log, acked. It
    tells ``on_stall``, drops nothing it cannot find again, and waits; the store replays the log
    from ``dispatched_offset`` once the allocation can succeed (``apply``, then ``unstall``), so
    every stored message becomes readable once, in order.
    """

    def __init__(
        self,
        make_readable: Callable[[DispatchRequest], None],
        index: Callable[[DispatchRequest], None],
    ) -> None:
        self._make_readable = make_readable
        self._index = index
        self._queue: deque[DispatchRequest] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self.dispatched_offset = 0  # commit-log offset up to which everything is dispatched
        self._offset_waiters = 0  # callers of wait_dispatched: what a drain must notify
        self.listeners: list[Callable[[DispatchRequest], None]] = []
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id: int | None = None
        self.stalled = False
        # Told (error, part) when dispatch stalls; part is "CQ" or "INDEX".
        self.on_stall: Callable[[SegmentAllocationError, str], None] | None = None

    def start(
        self, from_offset: int, loop: asyncio.AbstractEventLoop | None = None, stalled: bool = False
    ) -> None:
        """Dispatch on ``loop`` (started from that loop's thread), else on a thread of our own;
        ``stalled`` when recovery could not dispatch everything (the disk is full)."""
        self.dispatched_offset = from_offset
        self.stalled = stalled
        self._loop = loop
        if loop is None:
            self._thread.start()
        else:
            self._loop_thread_id = threading.get_ident()

    def submit(self, request: DispatchRequest) -> None:
        self._queue.append(request)
        if len(self._queue) == 1:
            if self._loop is None:
                with self._cond:
                    self._cond.notify()
            elif threading.get_ident() == self._loop_thread_id:
                # Appended by a handler on the loop: no wake-up byte through the self-pipe
                # (a system call and an extra loop turn per message).
                self._loop.call_soon(self._drain, self._queue)
            else:
                self._loop.call_soon_threadsafe(self._drain, self._queue)

    def _on_loop_thread(self) -> bool:
        return self._loop is not None and threading.get_ident() == self._loop_thread_id

    def dispatch_pending(self) -> None:
        """On the dispatch loop's thread: apply what is queued now instead of at the loop's next
        turn (a consumer's held pull is waiting for it)."""
        if self._queue and self._on_loop_thread():
            self._drain(self._queue)

    def dispatch_now(self, request: DispatchRequest) -> None:
        """Apply one request synchronously (recovery, before the thread starts)."""
        self._make_readable(request)
        self._index(request)
        self.dispatched_offset = request.commitlog_offset + request.size

    def apply(self, request: DispatchRequest) -> None:
        """Apply a request replayed from the commit log while stalled (the store's retry): as a
        drain does, but an allocation failure propagates, leaving ``dispatched_offset`` at it.
        Its consume-queue entry and index keys are skipped when already written."""
        self._make_readable(request)
        if self.listeners:
            self._notify(self.listeners, request)
        self._index(request)
        self.dispatched_offset = request.commitlog_offset + request.size

    def unstall(self) -> None:
        """Everything in the log is dispatched again (called under the commit-log lock, so no
        append slips between): what was queued meanwhile was replayed already."""
        self._queue.clear()
        self.stalled = False
        with self._cond:
            self._cond.notify_all()

    def _stall(self, request: DispatchRequest, error: SegmentAllocationError, part: str) -> None:
        log.error("dispatch stopped at commit-log offset %d until %s can be allocated: %s",
                  request.commitlog_offset, part, error)  # fmt: skip
        # In this order: the store's retry starts only once ``stalled`` is set, so the flag it
        # clears when done is already set, and nothing it queues afterwards is cleared here.
        if self.on_stall is not None:
            self.on_stall(error, part)
        self._queue.clear()  # all of it is in the commit log, replayed from dispatched_offset
        self.stalled = True
        with self._cond:
            self._cond.notify_all()

    def wait_dispatched(self, offset: int, timeout: float | None = None) -> bool:
        """Block until everything below commit-log ``offset`` is visible to readers."""
        if self._on_loop_thread():  # the loop cannot wait for itself: dispatch now instead
            self._drain(self._queue)
        with self._cond:
            # Counted under the lock, before the offset is first read: a drain that moves the
            # offset after that read sees the count and notifies.
            self._offset_waiters += 1
            try:
                return self._cond.wait_for(lambda: self.dispatched_offset >= offset or self._stopped, timeout)
            finally:
                self._offset_waiters -= 1

    @property
    def behind(self) -> int:
        return len(self._queue)

    def _run(self) -> None:
        queue = self._queue
        while True:
            with self._cond:
                self._cond.wait_for(lambda: (queue and not self.stalled) or self._stopped, timeout=0.1)
                if self._stopped and (not queue or self.stalled):
                    self._cond.notify_all()
                    return
            self._drain(queue)

    def _drain(self, queue: deque[DispatchRequest]) -> None:
        if self.stalled:
            return  # the store's retry replays the log; nothing here may overtake it
        make_readable, index, listeners = self._make_readable, self._index, self.listeners
        while queue:
            request = queue.popleft()
            try:
                make_readable(request)
            except SegmentAllocationError as exc:
                return self._stall(request, exc, "CQ")
            except Exception:
                log.exception("dispatch of the message at %d failed", request.commitlog_offset)
            if listeners:
                self._notify(listeners, request)
            try:
                index(request)
            except SegmentAllocationError as exc:
                return self._stall(request, exc, "INDEX")
            except Exception:
                log.exception("indexing the message at %d failed", request.commitlog_offset)
            self.dispatched_offset = request.commitlog_offset + request.size
        if self._offset_waiters:  # nobody waits for an offset (the usual drain): no lock, no call
            with self._cond:
                self._cond.notify_all()

    @staticmethod
    def _notify(listeners, request: DispatchRequest) -> None:
        for listener in listeners:
            try:
                listener(request)
            except Exception:
                log.exception("dispatch listener failed")

    def shutdown(self) -> None:
        if self._loop is not None:
            self._drain(self._queue)  # whatever the loop had not reached yet
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


__all__ = ["SCHEDULE_TOPIC", "DispatchRequest", "MessageDecodeError", "ReputService"]
