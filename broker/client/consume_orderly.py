"""Orderly consumption for the push consumer (RocketMQ's ConsumeMessageOrderlyService).

A queue is consumed only while this client holds its lock on the broker (LOCK_BATCH_MQ), by one
thread at a time, in queue-offset order:
- rebalancing locks a queue before its first pull and, when the queue goes to another member,
  waits for the batch in progress, commits the offset and only then unlocks it, so the next
  owner starts exactly after the last message consumed here;
- locks are renewed every 20 s (the broker lets them expire after 60 s); a queue whose lock
  this client has not renewed for 30 s is not consumed until it is locked again;
- a listener answering SUSPEND_CURRENT_QUEUE_A_MOMENT (or failing) gets the same messages
  again after ``suspend_current_queue_time_ms``; the offset stays before them meanwhile. Once a
  message was re-consumed ``max_reconsume_times`` times (unlimited by default, as RocketMQ), it is
  sent back to ``%RETRY%<group>`` (the broker moves it to the DLQ) and the queue moves on.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.message import Message
from broker.common.message_queue import MessageQueue
from broker.common.system_names import CLIENT_INNER_PRODUCER_GROUP

from .consumer_core import BROADCASTING
from .push_consumer import restore_retry_topic

if TYPE_CHECKING:
    from .producer import Producer

log = logging.getLogger(__name__)


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class OrderlyProcessQueue:
    """Messages of one queue pulled and not yet consumed, oldest first, and its lock state."""

    def __init__(self) -> None:
        self.pending: collections.deque = collections.deque()
        self.state_lock = threading.Lock()
        self.consume_lock = threading.Lock()  # held while a batch is with the listener
        self.scheduled = False  # a worker owns this queue (running or waiting to retry)
        self.dropped = False
        self.locked = False
        self.last_lock_ms = 0.0

    def add(self, messages) -> bool:
        """Queue messages; True when the caller must start a worker for this queue."""
        with self.state_lock:
            self.pending.extend(messages)
            if self.scheduled:
                return False
            self.scheduled = True
            return True

    def take(self, count: int) -> list:
        """The next ``count`` messages; an empty list also ends the worker's turn."""
        with self.state_lock:
            batch = [self.pending.popleft() for _ in range(min(count, len(self.pending)))]
            if not batch:
                self.scheduled = False
            return batch

    def put_back(self, batch: list) -> None:
        with self.state_lock:
            self.pending.extendleft(reversed(batch))

    def end_turn(self) -> None:
        with self.state_lock:
            self.scheduled = False

    def mark_locked(self, locked: bool) -> None:
        self.locked = locked
        if locked:
            self.last_lock_ms = time.monotonic() * 1000

    def lock_valid(self, max_live_ms: int) -> bool:
        return self.locked and time.monotonic() * 1000 - self.last_lock_ms <= max_live_ms

    def has_in_flight(self) -> bool:
        """Messages waiting, or a batch with the listener (its offset is committed before the
        consume lock is let go)."""
        with self.state_lock:
            return bool(self.pending) or self.consume_lock.locked()

    def __len__(self) -> int:
        return len(self.pending)


def _run_hooks(hooks, *args) -> None:
    # A failing hook (trace, metrics) must not leave the queue stuck without a worker.
    for hook in hooks:
        try:
            hook(*args)
        except Exception:
            log.exception("a consume hook failed")


class ConsumeMessageOrderlyService:
    def __init__(
        self,
        consumer,
        listener: Callable,
        *,
        suspend_current_queue_time_ms: int = 1000,
        max_reconsume_times: int = -1,
        lock_renew_interval_ms: int = 20_000,
        lock_max_live_ms: int = 30_000,
    ) -> None:
        self.consumer = consumer
        self.listener = listener
        self.suspend_s = suspend_current_queue_time_ms / 1000
        self.max_reconsume_times = max_reconsume_times if max_reconsume_times >= 0 else 2**31 - 1
        self.renew_interval_s = lock_renew_interval_ms / 1000
        self.lock_max_live_ms = lock_max_live_ms
        self.queues: dict[MessageQueue, OrderlyProcessQueue] = {}
        self._renew_task = None
        self._producer: Producer | None = None  # made on first use: sends back to retry topics
        self.stopping = False

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._renew_task = self.consumer.instance.submit(self._renew_loop())

    def shutdown(self) -> None:
        """Stop renewing and taking locks; ``unlock_all`` then releases what is still held."""
        self.stopping = True
        if self._renew_task is not None:
            self._renew_task.cancel()

    async def unlock_all(self) -> None:
        """Release every lock still held (a rebalance racing the shutdown may have taken one)."""
        by_broker: dict[str, list[MessageQueue]] = collections.defaultdict(list)
        for mq in list(self.queues):
            by_broker[mq.broker_name].append(mq)
        self.queues.clear()
        for broker_name, mqs in by_broker.items():
            await self._unlock(broker_name, mqs)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_interval_s)
            try:
                await self.lock_all()
            except Exception as exc:
                log.warning("renewing the queue locks of %s failed: %s", self.consumer.group, exc)

    async def lock_all(self) -> None:
        by_broker: dict[str, list[MessageQueue]] = collections.defaultdict(list)
        for mq in list(self.queues):
            by_broker[mq.broker_name].append(mq)
        for broker_name, mqs in by_broker.items():
            held = await self._lock(broker_name, mqs)
            for mq in mqs:
                queue = self.queues.get(mq)
                if queue is not None:
                    queue.mark_locked(mq in held)

    @property
    def _uses_broker_locks(self) -> bool:
        # Broadcasting members each consume every queue themselves: only clustering needs locks.
        return self.consumer.message_model != BROADCASTING

    async def _lock(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        if not self._uses_broker_locks:
            return set(mqs)
        instance = self.consumer.instance
        addr = instance.broker_addr(broker_name)
        if addr is None:
            return set()
        return await instance.api.lock_batch_mq(addr, self.consumer.group, instance.client_id, mqs)

    async def _unlock(self, broker_name: str, mqs: list[MessageQueue]) -> None:
        if not self._uses_broker_locks:
            return
        instance = self.consumer.instance
        addr = instance.broker_addr(broker_name)
        try:
            if addr is not None:
                await instance.api.unlock_batch_mq(addr, self.consumer.group, instance.client_id, mqs)
        except Exception as exc:
            log.warning("cannot unlock %s (the locks will expire on the broker): %s", mqs, exc)

    # -- rebalance hooks ----------------------------------------------------------------------
    async def acquire_queue(self, mq: MessageQueue) -> bool:
        if self.stopping:
            return False
        try:
            held = mq in await self._lock(mq.broker_name, [mq])
        except Exception as exc:
            log.debug("cannot lock %s: %s", mq, exc)
            return False
        if held and self.stopping:  # the consumer began shutting down meanwhile
            await self._unlock(mq.broker_name, [mq])
            return False
        if held:
            queue = OrderlyProcessQueue()
            queue.mark_locked(True)
            self.queues[mq] = queue
        return held

    def on_queue_dropped(self, mq: MessageQueue) -> None:
        queue = self.queues.get(mq)
        if queue is not None:
            queue.dropped = True

    async def release_queue(self, mq: MessageQueue) -> None:
        """Wait for the batch in progress, commit the offset, then unlock (in that order)."""
        queue = self.queues.pop(mq, None)
        if queue is None:
            return
        loop = asyncio.get_running_loop()
        wait_s = self.lock_max_live_ms / 1000
        idle = await loop.run_in_executor(None, queue.consume_lock.acquire, True, wait_s)
        if not idle:
            # The listener is stuck: leave the lock to expire on the broker rather than let a
            # second consumer start on this queue while this one may still be working on it.
            log.warning("the listener still holds %s; its lock will expire on the broker", mq)
            return
        try:
            await self.consumer.offsets.persist([mq])
            await self._unlock(mq.broker_name, [mq])
        finally:
            queue.consume_lock.release()

    # -- pulling hooks ------------------------------------------------------------------------
    def is_busy(self, mq: MessageQueue) -> bool:
        queue = self.queues.get(mq)
        if queue is None or not queue.lock_valid(self.lock_max_live_ms):
            return True  # never pull for a queue this client does not hold
        return len(queue) >= self.consumer.pull_threshold

    def has_in_flight(self, mq: MessageQueue) -> bool:
        queue = self.queues.get(mq)
        return queue is not None and queue.has_in_flight()

    def on_messages(self, mq: MessageQueue, messages: list) -> None:
        queue = self.queues.get(mq)
        if queue is not None and not queue.dropped and queue.add(messages):
            self.consumer.pool.submit(self._consume, mq, queue)

    # -- consuming ----------------------------------------------------------------------------
    def _consume(self, mq: MessageQueue, queue: OrderlyProcessQueue) -> None:
        consumer = self.consumer
        while True:
            if queue.dropped or not consumer.running:
                queue.end_turn()
                return
            if not queue.lock_valid(self.lock_max_live_ms):
                self._relock_and_retry(mq, queue)
                return
            with queue.consume_lock:
                if queue.dropped:
                    queue.end_turn()
                    return
                batch = queue.take(consumer.consume_batch_size)
                if not batch:
                    return
                pause_s = self._process(mq, queue, batch)
                if pause_s is not None:
                    self._later(pause_s, self._consume, mq, queue)
                    return

    def _process(self, mq: MessageQueue, queue: OrderlyProcessQueue, batch: list) -> float | None:
        """Hand ``batch`` to the listener; the seconds to pause before retrying it, or None when done.

        The listener may set ``context["suspend_current_queue_time_ms"]`` to choose this pause
        (RocketMQ's ConsumeOrderlyContext.setSuspendCurrentQueueTimeMillis)."""
        consumer = self.consumer
        for msg in batch:  # as the concurrent service does (RocketMQ's resetRetryAndNamespace)
            restore_retry_topic(msg, consumer.group)
        _run_hooks(consumer.before_hooks, batch)
        context = {"message_queue": mq, "orderly": True}
        try:
            status = self.listener(batch, context)
        except Exception:
            log.exception("the orderly listener of %s raised; the queue pauses and retries", consumer.group)
            status = None
        _run_hooks(consumer.after_hooks, batch, status)
        if status is not ConsumeOrderlyStatus.SUCCESS and self._must_suspend(batch):
            queue.put_back(batch)
            chosen = context.get("suspend_current_queue_time_ms")
            return chosen / 1000 if isinstance(chosen, int | float) and chosen >= 0 else self.suspend_s
        consumer.offsets.update(mq, batch[-1].queue_offset + 1, increase_only=True)
        return None

    def _must_suspend(self, batch: list) -> bool:
        suspend = False
        for msg in batch:
            if msg.reconsume_times >= self.max_reconsume_times:
                msg.put_property(const.PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
                if self._send_back(msg):
                    continue
            suspend = True
            msg.reconsume_times += 1
        return suspend

    def _send_back(self, msg) -> bool:
        """Re-send a message that exhausted its local retries to the group's retry topic."""
        group = self.consumer.group
        back = Message(tc.retry_topic(group), msg.body, msg.flag, dict(msg.properties))
        back.put_property(
            const.PROPERTY_ORIGIN_MESSAGE_ID,
            msg.properties.get(const.PROPERTY_ORIGIN_MESSAGE_ID) or msg.client_msg_id,
        )
        original_topic = msg.properties.get(const.PROPERTY_RETRY_TOPIC, msg.topic)
        back.put_property(const.PROPERTY_RETRY_TOPIC, original_topic)
        back.put_property(const.PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
        back.put_property(const.PROPERTY_MAX_RECONSUME_TIMES, str(self.max_reconsume_times))
        back.properties.pop(const.PROPERTY_TRANSACTION_PREPARED, None)
        back.delay_time_level = 3 + msg.reconsume_times
        try:
            self.consumer.instance.run(self._inner_producer().asend(back), timeout=5)
            return True
        except Exception as exc:
            log.warning("sending %s back to %s failed: %s", msg.client_msg_id, back.topic, exc)
            return False

    def _inner_producer(self) -> Producer:
        if self._producer is None:
            from .producer import Producer

            self._producer = Producer(
                CLIENT_INNER_PRODUCER_GROUP, self.consumer.namesrv_addr, instance=self.consumer.instance
            )
        return self._producer

    def _relock_and_retry(self, mq: MessageQueue, queue: OrderlyProcessQueue) -> None:
        async def relock() -> None:
            try:
                held = mq in await self._lock(mq.broker_name, [mq])
            except Exception as exc:
                log.debug("relocking %s failed: %s", mq, exc)
                held = False
            queue.mark_locked(held)
            await asyncio.sleep(0.01 if held else 0.1)
            if self.consumer.running and not queue.dropped:
                self.consumer.pool.submit(self._consume, mq, queue)
            else:
                queue.end_turn()

        self.consumer.instance.submit(relock())

    def _later(self, delay_s: float, action, *args) -> None:
        loop = self.consumer.instance.loop

        def submit() -> None:
            if self.consumer.running:
                self.consumer.pool.submit(action, *args)

        loop.call_soon_threadsafe(loop.call_later, delay_s, submit)
