"""``PushConsumer``: messages handed to a listener as they arrive (concurrently).

Each owned queue has a process queue of messages pulled but not yet consumed; the committed
offset is the smallest offset still in flight, so a crash re-delivers rather than loses. A
listener that fails (returns RECONSUME_LATER, None, or raises) gets the message again later.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from broker.common.hosts import format_host
from broker.common.message_const import PROPERTY_RETRY_TOPIC
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import ConsumerSendMsgBackRequestHeader
from broker.common.topic_config import retry_topic

from .consumer_core import BROADCASTING, ConsumerCore

if TYPE_CHECKING:
    from .consume_async import AsyncConsumeService
    from .consume_orderly import ConsumeMessageOrderlyService
    from .trace.dispatcher import AsyncTraceDispatcher

log = logging.getLogger(__name__)


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ProcessQueue:
    """Messages of one queue pulled and not yet consumed, by queue offset."""

    def __init__(self) -> None:
        self.in_flight: dict[int, object] = {}
        self.max_seen = -1
        # The last pull answer's next offset: everything below it was delivered or filtered out.
        self.pulled_to = 0
        self.lock = threading.Lock()
        self.dropped = False

    def add(self, messages) -> None:
        with self.lock:
            for msg in messages:
                self.in_flight[msg.queue_offset] = msg
                self.max_seen = max(self.max_seen, msg.queue_offset)

    def remove(self, offset: int) -> int:
        """Forget a consumed message; return the offset to commit: the smallest in flight, or,
        with none left, the last answer's next offset (past the messages the filter skipped)."""
        with self.lock:
            self.in_flight.pop(offset, None)
            return min(self.in_flight) if self.in_flight else max(self.max_seen + 1, self.pulled_to)

    def pulled(self, next_offset: int) -> bool:
        """Note a pull answer's next offset; True when nothing is in flight (it may be committed
        now; otherwise the last message consumed commits it)."""
        with self.lock:
            self.pulled_to = max(self.pulled_to, next_offset)
            return not self.in_flight

    def __len__(self) -> int:
        return len(self.in_flight)


class PushConsumer(ConsumerCore):
    subscribes_to_retry_topic = True

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        consume_threads: int = 20,
        consume_batch_size: int = 1,
        pull_threshold_per_queue: int = 1000,
        retry_delay_s: float = 5.0,
        max_reconsume_times: int | None = None,
        send_back_timeout_s: float = 3.0,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        # Message trace: consume records (before/after each listener call) go to the trace topic.
        self.enable_trace, self.trace_topic = enable_trace, trace_topic
        self.trace_dispatcher: AsyncTraceDispatcher | None = None
        self.consume_batch_size = consume_batch_size
        self.pull_threshold = pull_threshold_per_queue
        self.retry_delay_s = retry_delay_s
        # None: the subscription group's retryMaxTimes (16 by default) decides on the broker.
        self.max_reconsume_times = max_reconsume_times
        self.send_back_timeout_s = send_back_timeout_s
        self.listener: Callable | None = None
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.before_hooks: list[Callable] = []
        self.after_hooks: list[Callable] = []
        self.pool = ThreadPoolExecutor(consume_threads, thread_name_prefix=f"consume-{group}")
        # A ConsumeMessageOrderlyService once an orderly listener is registered; an
        # AsyncConsumeService for a coroutine listener (asyncio API).
        self.orderly: ConsumeMessageOrderlyService | None = None
        self.async_service: AsyncConsumeService | None = None

    def register_message_listener(self, listener: Callable) -> None:
        """``listener(messages, context) -> ConsumeConcurrentlyStatus``."""
        self.listener = listener

    def register_message_listener_orderly(self, listener: Callable, **options) -> None:
        """``listener(messages, context) -> ConsumeOrderlyStatus``: each queue in order, one thread
        at a time, while this client holds the queue's lock (options: see ``consume_orderly``)."""
        from .consume_orderly import ConsumeMessageOrderlyService

        self.listener = listener
        self.orderly = ConsumeMessageOrderlyService(self, listener, **options)

    def start(self) -> PushConsumer:
        self._prepare_start()
        try:
            self._start_core()
        except Exception:
            self._release_trace()  # a refused start leaves no trace producer behind
            raise
        if self.orderly is not None:
            self.orderly.start()
        return self

    def _prepare_start(self) -> None:
        """Checks and the trace dispatcher (blocking: its own producer starts)."""
        if self.listener is None:
            raise ValueError("register a message listener before starting the consumer")
        if self.enable_trace and self.trace_dispatcher is None:
            from .trace import install_consumer_trace

            self.trace_dispatcher = install_consumer_trace(self, self.trace_topic)

    def _release_trace(self) -> None:
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    def shutdown(self) -> None:
        if self.orderly is not None:
            self.orderly.shutdown()
        # Consumption in flight ends before the queues are let go, so what the listener finished
        # is in the offsets committed then; batches not started are cancelled and stay below the
        # committed offset, for the queue's next owner. (Dropped first, a queue discarded the
        # offsets of batches that ended after it: each of their messages consumed twice.)
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._shutdown_core()
        self._release_trace()

    async def _drain(self) -> None:
        """Asyncio API, at shutdown once pulling stopped: the consume workers and threads end
        before the connections close (a late send-back must not reconnect)."""
        if self.async_service is not None:
            await self.async_service.shutdown()
        await asyncio.to_thread(self.pool.shutdown, wait=True, cancel_futures=True)

    # -- hooks of ConsumerCore ----------------------------------------------------------------
    def is_busy(self, mq: MessageQueue) -> bool:
        if self.orderly is not None:
            return self.orderly.is_busy(mq)
        queue = self.process_queues.get(mq)
        return queue is not None and len(queue) >= self.pull_threshold

    def has_in_flight(self, mq: MessageQueue) -> bool:
        if self.orderly is not None:
            return self.orderly.has_in_flight(mq)
        queue = self.process_queues.get(mq)
        return queue is not None and len(queue) > 0

    def on_messages(self, mq: MessageQueue, messages: list) -> None:
        if self.orderly is not None:
            return self.orderly.on_messages(mq, messages)
        queue = self.process_queues.setdefault(mq, ProcessQueue())
        queue.add(messages)
        if self.async_service is not None:
            return self.async_service.on_messages(mq, queue, messages)
        for start in range(0, len(messages), self.consume_batch_size):
            try:
                self.pool.submit(self._consume, mq, queue, messages[start : start + self.consume_batch_size])
            except RuntimeError:  # shutting down: the rest stays unconsumed, below the commit
                return None
        return None

    def _correct_offset(self, mq: MessageQueue, next_offset: int) -> None:
        """RocketMQ commits past skipped messages only on an answer that finds the queue drained
        (so a caught-up filtered group showed lag until its next pull's 15-s hold ended); here the
        queue keeps the answer's offset and its last consumed message commits it."""
        queue = self.process_queues.get(mq) if self.orderly is None else None
        if queue is None:
            return super()._correct_offset(mq, next_offset)
        if queue.pulled(next_offset):
            self.offsets.update(mq, next_offset, increase_only=True)
        return None

    def on_queue_dropped(self, mq: MessageQueue) -> None:
        if self.orderly is not None:
            self.orderly.on_queue_dropped(mq)
        queue = self.process_queues.pop(mq, None)
        if queue is not None:
            queue.dropped = True

    async def _stop_all(self) -> None:
        await super()._stop_all()
        if self.orderly is not None:
            await self.orderly.unlock_all()

    async def acquire_queue(self, mq: MessageQueue) -> bool:
        return await self.orderly.acquire_queue(mq) if self.orderly is not None else True

    async def release_queue(self, mq: MessageQueue) -> None:
        if self.orderly is not None:
            await self.orderly.release_queue(mq)

    # -- consuming ----------------------------------------------------------------------------
    # The decisions (what the listener's answer means, what is sent back, what is committed)
    # live in the helpers below; ``_consume`` runs them on a consume thread, and the asyncio
    # consumer (``consume_async.AsyncConsumeService``) runs the same helpers on the loop.
    def _consume(self, mq: MessageQueue, queue: ProcessQueue, messages: list) -> None:
        if queue.dropped or not self.running:
            return
        context = self._begin_consume(mq, messages)
        assert self.listener is not None  # start() refuses a consumer without one
        try:
            status = self.listener(messages, context)
        except Exception:
            log.exception(
                "the message listener of %s raised; the messages will be consumed again", self.group
            )
            status = None
        ack_index, delay_level = self._end_consume(messages, context, status)
        failed = self._failed_to_send_back(messages, ack_index)
        kept = [msg for msg in failed if not self.send_message_back(msg, mq, delay_level)]
        self._finish_consume(mq, queue, messages, kept)

    def _begin_consume(self, mq: MessageQueue, messages: list) -> dict:
        """Original topics back, before-hooks run; the listener's context."""
        for msg in messages:
            restore_retry_topic(msg, self.group)
        for hook in self.before_hooks:
            hook(messages)
        return {"message_queue": mq, "delay_level_when_next_consume": 0, "ack_index": len(messages) - 1}

    def _end_consume(self, messages: list, context: dict, status) -> tuple[int, int]:
        """After-hooks run; (index of the last message consumed, delay level for the failed)."""
        for hook in self.after_hooks:
            hook(messages, status)
        last = len(messages) - 1
        ack_index = min(_context_int(context, "ack_index", last), last) if status is SUCCESS else -1
        return ack_index, _context_int(context, "delay_level_when_next_consume", 0)

    def _failed_to_send_back(self, messages: list, ack_index: int) -> list:
        """Messages after ``ack_index`` failed: to be sent back (clustering); broadcasting drops
        them, as RocketMQ does."""
        failed = messages[ack_index + 1 :]
        if failed and self.message_model == BROADCASTING:
            for msg in failed:
                log.warning(
                    "BROADCASTING: consuming message %s of %s failed; dropped", msg.client_msg_id, msg.topic
                )
            return []
        return failed

    def _finish_consume(self, mq, queue: ProcessQueue, messages: list, kept: list) -> None:
        """Commit what is done; ``kept`` (the broker would not take them back) stay pinned here."""
        for msg in messages:
            if any(msg is k for k in kept):
                continue
            commit = queue.remove(msg.queue_offset)
            if not queue.dropped:
                self.offsets.update(mq, commit, increase_only=True)
        if kept:
            for msg in kept:
                msg.reconsume_times += 1
            self._consume_locally_later(mq, queue, kept)

    def _send_back_request(
        self, msg, mq: MessageQueue, delay_level: int
    ) -> tuple[str, ConsumerSendMsgBackRequestHeader]:
        addr = self._client().broker_addr(mq.broker_name) or format_host(msg.store_host)
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commitlog_offset,
            group=self.group,
            delay_level=delay_level,
            origin_msg_id=msg.client_msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=self.max_reconsume_times,
        )
        return addr, header

    def send_message_back(self, msg, mq: MessageQueue, delay_level: int = 0) -> bool:
        """CONSUMER_SEND_MSG_BACK for ``msg`` (consumed from ``mq``); False when it failed.

        ``delay_level`` 0 lets the broker choose (3 + reconsume times), < 0 dead-letters at once."""
        addr, header = self._send_back_request(msg, mq, delay_level)
        instance = self._client()
        try:
            instance.run(instance.api.send_back(addr, header), timeout=self.send_back_timeout_s)
            return True
        except Exception as exc:
            self._log_send_back_failure(msg, addr, exc)
            return False

    async def asend_message_back(self, msg, mq: MessageQueue, delay_level: int = 0) -> bool:
        """``send_message_back`` on the instance's loop."""
        addr, header = self._send_back_request(msg, mq, delay_level)
        try:
            async with asyncio.timeout(self.send_back_timeout_s):
                await self._client().api.send_back(addr, header)
            return True
        except Exception as exc:
            self._log_send_back_failure(msg, addr, exc)
            return False

    def _log_send_back_failure(self, msg, addr: str, exc: Exception) -> None:
        log.warning("sending message %s back to %s failed (%s); consuming it again locally in %.1f s",
                    msg.client_msg_id, addr, exc or type(exc).__name__, self.retry_delay_s)  # fmt: skip

    def _consume_locally_later(self, mq: MessageQueue, queue: ProcessQueue, messages: list) -> None:
        """The broker did not take them back: keep their offsets pinned and try here again later."""
        if self.async_service is not None:
            return self.async_service.consume_later(mq, queue, messages)

        def again() -> None:
            if self.running and not queue.dropped:
                try:
                    self.pool.submit(self._consume, mq, queue, messages)
                except RuntimeError:  # the pool shut down meanwhile
                    pass

        timer = threading.Timer(self.retry_delay_s, again)
        timer.daemon = True
        timer.start()
        return None


SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def _context_int(context: dict, key: str, default: int) -> int:
    """A number the listener left in the context; a bad value is ignored (and said so), never fatal."""
    value = context.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        log.warning("the listener set context[%r]=%r, not a number; using %d", key, value, default)
        return default


def restore_retry_topic(msg, group: str) -> None:
    """A message re-delivered through ``%RETRY%<group>`` shows its original topic again."""
    original = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        msg.topic = original
