"""The asyncio API: producers and consumers that run on the application's own event loop.

Like nats-py or aio-pika, and unlike the blocking API (whose network work runs on a background
loop thread), these clients are tasks and callbacks of the loop that starts them: an awaited
send goes out and comes back on that loop, with no thread hand-off. They share all their logic
with the blocking classes (``Producer``, ``PushConsumer``, ``LitePullConsumer``), which they
drive on a client instance of the running loop (shared by the clients of that loop with the
same instance name, ``MQClientInstance.shared``).

Blocking calls of the underlying client from the loop itself are refused with an
``MQClientError`` (they would wait forever); from other threads they still work.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
from collections.abc import Callable

from broker.common.message import Message, MessageExt
from broker.common.message_queue import MessageQueue

from . import request_reply
from .consume_async import AsyncConsumeService
from .instance import MQClientInstance
from .producer import Producer, SendResult
from .pull_consumer import LitePullConsumer
from .push_consumer import ConsumeConcurrentlyStatus, PushConsumer


class AsyncProducer:
    """``async with AsyncProducer(group, namesrv) as producer: await producer.send(msg)``.

    Options as ``Producer``'s (``send_timeout_ms``, ``retry_times``, ``enable_trace`` …)."""

    def __init__(self, group: str, namesrv_addr: str, **options) -> None:
        self.producer = Producer(group, namesrv_addr, **options)

    async def start(self) -> AsyncProducer:
        producer = self.producer
        instance = MQClientInstance.of_running_loop(
            producer.instance,
            producer.namesrv_addr,
            producer.instance_name,
            credentials=producer.credentials,
            tls=producer.tls,
        )
        await instance.ajoin("producer", producer.group, producer)
        producer.instance = instance
        await instance.astart()
        if producer.enable_trace:
            await asyncio.to_thread(producer._install_trace)
        return self

    async def shutdown(self) -> None:
        producer = self.producer
        producer.fail_queued_sends()
        await asyncio.to_thread(producer._release_trace)
        if producer.instance is not None:
            await producer.instance.aleave("producer", producer.group, producer)

    async def __aenter__(self) -> AsyncProducer:
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.shutdown()

    async def send(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector: Callable | None = None,
        arg=None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer; retried on another broker as ``Producer.send``."""
        return await self.producer.asend(msg, queue, selector, arg, timeout_ms)

    def send_async(self, msg: Message, queue: MessageQueue | None = None) -> asyncio.Future:
        """Start a send now and return a future of its ``SendResult`` (no task per message when
        the route and the connection are cached). While ``max_async_in_flight`` sends (or
        ``max_async_in_flight_bytes``) await answers, it waits for room first, at most its send
        timeout (then ``RemotingTooMuchRequestError``, not sent)."""
        future = self.producer._instance().loop.create_future()
        self.producer.start_async_when_room(msg, queue, future)
        return future

    async def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        await self.producer.asend_oneway(msg, queue)

    async def send_batch(self, messages: list[Message], queue: MessageQueue | None = None) -> list:
        """One or more batches (split at 4 MiB) of messages of one topic."""
        return await self.producer.asend_batch(messages, queue)

    async def request(self, msg: Message, timeout_ms: int = 3000, **send_options):
        """Send ``msg`` and return the reply message; ``RequestTimeoutError`` when none comes in time."""
        return await request_reply.request(self.producer, msg, timeout_ms, **send_options)


class AsyncPushConsumer:
    """``await consumer.start()``; an ``async def`` listener is awaited on the caller's loop by
    ``consume_concurrency`` workers (default 20); a plain function runs on consume threads.
    Other options as ``PushConsumer``'s."""

    def __init__(self, group: str, namesrv_addr: str, *, consume_concurrency: int = 20, **options) -> None:
        self.consumer = PushConsumer(group, namesrv_addr, **options)
        self.consume_concurrency = consume_concurrency

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self.consumer.subscribe(topic, expression)

    def register_message_listener(self, listener: Callable) -> None:
        """``listener(messages, context) -> ConsumeConcurrentlyStatus`` (``async def`` or not)."""
        self.consumer.register_message_listener(listener)
        self.consumer.async_service = None
        if inspect.iscoroutinefunction(listener):
            self.consumer.async_service = AsyncConsumeService(
                self.consumer, listener, self.consume_concurrency
            )

    def register_message_listener_orderly(self, listener: Callable, **options) -> None:
        """An orderly listener (may be ``async def``); ``options`` as ``PushConsumer``'s. Orderly
        consumption keeps its consume threads; a coroutine listener is run on the caller's loop."""
        if inspect.iscoroutinefunction(listener):
            loop, coroutine_listener = asyncio.get_running_loop(), listener

            def listener(messages, context):
                return asyncio.run_coroutine_threadsafe(coroutine_listener(messages, context), loop).result()

        self.consumer.register_message_listener_orderly(listener, **options)

    async def start(self) -> AsyncPushConsumer:
        consumer = self.consumer
        await asyncio.to_thread(consumer._prepare_start)
        if consumer.async_service is not None:
            consumer.async_service.start()
        try:
            await consumer._astart_core()
        except Exception:
            if consumer.async_service is not None:
                await consumer.async_service.shutdown()
            await asyncio.to_thread(consumer._release_trace)
            raise
        if consumer.orderly is not None:
            consumer.orderly.start()
        return self

    async def shutdown(self) -> None:
        consumer = self.consumer
        if consumer.orderly is not None:
            consumer.orderly.shutdown()
        await consumer._ashutdown_core()
        await asyncio.to_thread(consumer._release_trace)

    async def __aenter__(self) -> AsyncPushConsumer:
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.shutdown()


class _LoopBuffer:
    """Pulled ``(queue, message)`` items for ``AsyncLitePullConsumer``: filled and emptied on the
    loop (``LitePullConsumer`` uses a thread-safe queue instead)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.items: collections.deque = collections.deque()
        self.nonempty = asyncio.Event()

    def qsize(self) -> int:
        return len(self.items)

    def put(self, item) -> None:
        self.items.append(item)
        self.nonempty.set()

    def take(self, count: int) -> list:
        items = [self.items.popleft() for _ in range(min(count, len(self.items)))]
        if not self.items:
            self.nonempty.clear()
        return items


class AsyncLitePullConsumer:
    """``await consumer.poll()``: pulling runs on the caller's loop, a poll waits on it.

    Options as ``LitePullConsumer``'s (``commit_offsets=False``: a reader that moves no offset)."""

    def __init__(self, group: str, namesrv_addr: str, **options) -> None:
        self.consumer = LitePullConsumer(group, namesrv_addr, **options)
        self._buffer = _LoopBuffer(self.consumer.buffer.maxsize)
        self.consumer.buffer = self._buffer  # filled and emptied on the caller's loop

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self.consumer.subscribe(topic, expression)

    def assign(self, queues) -> None:
        self.consumer.assign(queues)

    async def start(self) -> AsyncLitePullConsumer:
        await self.consumer._astart_core()
        return self

    async def poll(self, timeout_s: float = 5.0) -> list:
        """Messages pulled so far (up to a batch), waiting up to ``timeout_s`` for the first."""
        return self.consumer._take(await self._pulled(timeout_s))

    async def poll_with_queues(self, timeout_s: float = 5.0) -> list[tuple[MessageQueue, MessageExt]]:
        """``poll``, each message with the queue it was pulled from (a message does not name
        its broker)."""
        return self.consumer._take_with_queues(await self._pulled(timeout_s))

    async def _pulled(self, timeout_s: float) -> list:
        buffer = self._buffer
        if not buffer.items:
            try:
                async with asyncio.timeout(timeout_s):
                    await buffer.nonempty.wait()
            except TimeoutError:
                pass
        return buffer.take(self.consumer.pull_batch_size)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` (a fresh route); empty when it has none."""
        return await self.consumer.afetch_message_queues(topic)

    async def max_offset(self, queue: MessageQueue) -> int:
        """The offset the next message of ``queue`` will get (``seek`` there to read what comes next)."""
        return await self.consumer.amax_offset(queue)

    async def commit(self) -> None:
        await self.consumer.acommit()

    async def seek(self, queue, offset: int) -> None:
        await self.consumer.aseek(queue, offset)

    def pause(self, queues) -> None:
        self.consumer.pause(queues)

    def resume(self, queues) -> None:
        self.consumer.resume(queues)

    async def shutdown(self) -> None:
        if self.consumer.auto_commit and self.consumer.running:
            await self.consumer.acommit()
        await self.consumer._ashutdown_core()

    async def __aenter__(self) -> AsyncLitePullConsumer:
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.shutdown()


__all__ = ["AsyncLitePullConsumer", "AsyncProducer", "AsyncPushConsumer", "ConsumeConcurrentlyStatus"]
