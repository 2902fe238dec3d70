"""Concurrent consumption with a coroutine listener, on the consumer's own loop (asyncio API).

A fixed number of worker tasks (``consume_concurrency``) take batches from a queue and await
the listener directly: no thread, no hand-off, no task per message. What the listener's answer
means (ack index, send-back, what to commit, broadcasting drops) is ``PushConsumer``'s logic;
only the waiting differs: the send-back is awaited, and a message the broker would not take
back is consumed here again after ``retry_delay_s`` through ``loop.call_later``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class AsyncConsumeService:
    def __init__(self, consumer, listener: Callable, concurrency: int = 20) -> None:
        if concurrency < 1:
            raise ValueError("consume_concurrency must be at least 1")
        self.consumer, self.listener, self.concurrency = consumer, listener, concurrency
        # Batches no worker has taken yet, and the workers waiting for one (each a future the
        # next batch is handed to directly: lighter than an asyncio.Queue on every message).
        self.backlog: collections.deque = collections.deque()
        self.idle: collections.deque[asyncio.Future] = collections.deque()
        self.workers: list[asyncio.Task] = []
        self.timers: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        """On the consumer's loop, before the first pull."""
        self.backlog.clear()
        self.idle.clear()
        self.workers = [
            asyncio.create_task(self._worker(), name=f"consume-{self.consumer.group}-{i}")
            for i in range(self.concurrency)
        ]

    async def shutdown(self) -> None:
        """Stop the workers; a listener still running is cancelled (its messages were not
        committed, so they come again: at least once)."""
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        for worker in self.workers:
            worker.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)
        self.workers = []

    def on_messages(self, mq, queue, messages: list) -> None:
        size = self.consumer.consume_batch_size
        for start in range(0, len(messages), size):
            self._hand((mq, queue, messages[start : start + size]))

    def _hand(self, batch: tuple) -> None:
        """To a waiting worker if there is one, else to the backlog."""
        idle = self.idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():  # (a worker being cancelled leaves a cancelled one)
                waiter.set_result(batch)
                return
        self.backlog.append(batch)

    def consume_later(self, mq, queue, messages: list) -> None:
        def again() -> None:
            self.timers.discard(timer)
            if self.consumer.running and not queue.dropped:
                self._hand((mq, queue, messages))

        timer = asyncio.get_running_loop().call_later(self.consumer.retry_delay_s, again)
        self.timers.add(timer)

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self.backlog:
                mq, queue, messages = self.backlog.popleft()
            else:
                waiter = loop.create_future()
                self.idle.append(waiter)
                mq, queue, messages = await waiter
            try:
                await self._consume(mq, queue, messages)
            except Exception:  # a worker must outlive any one batch
                log.exception("consuming a batch of %s failed", self.consumer.group)

    async def _consume(self, mq, queue, messages: list) -> None:
        consumer = self.consumer
        if queue.dropped or not consumer.running:
            return
        context = consumer._begin_consume(mq, messages)
        try:
            status = await self.listener(messages, context)
        except Exception:
            log.exception(
                "the message listener of %s raised; the messages will be consumed again", consumer.group
            )
            status = None
        ack_index, delay_level = consumer._end_consume(messages, context, status)
        kept = []
        for msg in consumer._failed_to_send_back(messages, ack_index):
            if not await consumer.asend_message_back(msg, mq, delay_level):
                kept.append(msg)
        consumer._finish_consume(mq, queue, messages, kept)
