"""``PushConsumer``: messages handed to a listener as they arrive (concurrently).

Each owned queue has a process queue of messages pulled but not yet consumed; the committed
offset is the smallest offset still in flight, so a crash re-delivers rather than loses. A
listener that fails (returns RECONSUME_LATER, None, or raises) gets the message again later.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .consumer_core import ConsumerCore
from .message_queue import MessageQueue

log = logging.getLogger(__name__)


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ProcessQueue:
    """Messages of one queue pulled and not yet consumed, by queue offset."""

    def __init__(self) -> None:
        self.in_flight: dict[int, object] = {}
        self.max_seen = -1
        self.lock = threading.Lock()
        self.dropped = False

    def add(self, messages) -> None:
        with self.lock:
            for msg in messages:
                self.in_flight[msg.queue_offset] = msg
                self.max_seen = max(self.max_seen, msg.queue_offset)

    def remove(self, offset: int) -> int:
        """Forget a consumed message; return the offset to commit (smallest in flight)."""
        with self.lock:
            self.in_flight.pop(offset, None)
            return min(self.in_flight) if self.in_flight else self.max_seen + 1

    def __len__(self) -> int:
        return len(self.in_flight)


class PushConsumer(ConsumerCore):
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        consume_threads: int = 20,
        consume_batch_size: int = 1,
        pull_threshold_per_queue: int = 1000,
        retry_delay_s: float = 1.0,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        # Message trace: consume records (before/after each listener call) go to the trace topic.
        self.enable_trace, self.trace_topic, self.trace_dispatcher = enable_trace, trace_topic, None
        self.consume_batch_size = consume_batch_size
        self.pull_threshold = pull_threshold_per_queue
        self.retry_delay_s = retry_delay_s
        self.listener: Callable | None = None
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.before_hooks: list[Callable] = []
        self.after_hooks: list[Callable] = []
        self.pool = ThreadPoolExecutor(consume_threads, thread_name_prefix=f"consume-{group}")
        self.orderly = None  # a ConsumeMessageOrderlyService once an orderly listener is registered

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
        if self.listener is None:
            raise ValueError("register a message listener before starting the consumer")
        if self.enable_trace and self.trace_dispatcher is None:
            from .trace import install_consumer_trace

            self.trace_dispatcher = install_consumer_trace(self, self.trace_topic)
        try:
            self._start_core()
        except Exception:
            if self.trace_dispatcher is not None:  # a refused start leaves no trace producer behind
                self.trace_dispatcher.shutdown()
                self.trace_dispatcher = None
            raise
        if self.orderly is not None:
            self.orderly.start()
        return self

    def shutdown(self) -> None:
        if self.orderly is not None:
            self.orderly.shutdown()
        self._shutdown_core()
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    # -- hooks of ConsumerCore ----------------------------------------------------------------
    def is_busy(self, mq: MessageQueue) -> bool:
        if self.orderly is not None:
            return self.orderly.is_busy(mq)
        queue = self.process_queues.get(mq)
        return queue is not None and len(queue) >= self.pull_threshold

    def on_messages(self, mq: MessageQueue, messages: list) -> None:
        if self.orderly is not None:
            return self.orderly.on_messages(mq, messages)
        queue = self.process_queues.setdefault(mq, ProcessQueue())
        queue.add(messages)
        for start in range(0, len(messages), self.consume_batch_size):
            self.pool.submit(self._consume, mq, queue, messages[start : start + self.consume_batch_size])

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
    def _consume(self, mq: MessageQueue, queue: ProcessQueue, messages: list) -> None:
        if queue.dropped or not self.running:
            return
        for hook in self.before_hooks:
            hook(messages)
        try:
            status = self.listener(messages, {"message_queue": mq})
        except Exception:
            log.exception(
                "the message listener of %s raised; the messages will be consumed again", self.group
            )
            status = None
        for hook in self.after_hooks:
            hook(messages, status)
        if status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            self._redeliver_later(mq, queue, messages)
            return
        for msg in messages:
            commit = queue.remove(msg.queue_offset)
            if not queue.dropped:
                self.offsets.update(mq, commit, increase_only=True)

    def _redeliver_later(self, mq: MessageQueue, queue: ProcessQueue, messages: list) -> None:
        """Try again after a pause; the offset stays behind the failed message meanwhile."""
        for msg in messages:
            msg.reconsume_times += 1

        def again() -> None:
            time.sleep(self.retry_delay_s)
            self._consume(mq, queue, messages)

        if self.running:
            self.pool.submit(again)
