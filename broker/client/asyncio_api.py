"""asyncio faces of the consumers, for applications that run on an event loop.

Network work already runs on the client instance's own loop; these wrappers keep the caller's
loop free: start, shutdown and poll run in a worker thread, and a push listener may be a
coroutine function, which then runs on the caller's loop (so it can use the application's own
async clients) while the consume thread waits for its answer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

from .pull_consumer import LitePullConsumer
from .push_consumer import ConsumeConcurrentlyStatus, PushConsumer


class AsyncPushConsumer:
    """``await consumer.start()``; listeners may be ``async def``."""

    def __init__(self, group: str, namesrv_addr: str, **options) -> None:
        self.consumer = PushConsumer(group, namesrv_addr, **options)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self.consumer.subscribe(topic, expression)

    def register_message_listener(self, listener: Callable) -> None:
        if not inspect.iscoroutinefunction(listener):
            self.consumer.register_message_listener(listener)
            return
        loop = asyncio.get_running_loop()

        def on_caller_loop(messages, context) -> ConsumeConcurrentlyStatus | None:
            # Runs on a consume thread: hand the coroutine to the application's loop and wait.
            return asyncio.run_coroutine_threadsafe(listener(messages, context), loop).result()

        self.consumer.register_message_listener(on_caller_loop)

    def register_message_listener_orderly(self, listener: Callable, **options) -> None:
        """An orderly listener (may be ``async def``); ``options`` as ``PushConsumer``'s."""
        if inspect.iscoroutinefunction(listener):
            loop, coroutine_listener = asyncio.get_running_loop(), listener

            def listener(messages, context):
                return asyncio.run_coroutine_threadsafe(coroutine_listener(messages, context), loop).result()

        self.consumer.register_message_listener_orderly(listener, **options)

    async def start(self) -> AsyncPushConsumer:
        await asyncio.to_thread(self.consumer.start)
        return self

    async def shutdown(self) -> None:
        await asyncio.to_thread(self.consumer.shutdown)


class AsyncLitePullConsumer:
    """``await consumer.poll()`` without blocking the loop."""

    def __init__(self, group: str, namesrv_addr: str, **options) -> None:
        self.consumer = LitePullConsumer(group, namesrv_addr, **options)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self.consumer.subscribe(topic, expression)

    def assign(self, queues) -> None:
        self.consumer.assign(queues)

    async def start(self) -> AsyncLitePullConsumer:
        await asyncio.to_thread(self.consumer.start)
        return self

    async def poll(self, timeout_s: float = 5.0) -> list:
        return await asyncio.to_thread(self.consumer.poll, timeout_s)

    async def commit(self) -> None:
        await asyncio.to_thread(self.consumer.commit_sync)

    async def seek(self, queue, offset: int) -> None:
        await asyncio.to_thread(self.consumer.seek, queue, offset)

    async def shutdown(self) -> None:
        await asyncio.to_thread(self.consumer.shutdown)
