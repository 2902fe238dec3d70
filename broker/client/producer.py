"""``Producer`` (blocking) and ``AsyncProducer`` (asyncio): RocketMQ's DefaultMQProducer.

Both drive one ``DefaultMQProducerImpl`` on the client instance's loop thread; see the package
docstring for how the two APIs relate.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable

from broker.common.message import Message

from .client_config import ClientConfig
from .client_instance import MQClientInstance, MQClientManager
from .errors import MQClientError
from .message_queue import MessageQueue
from .producer_impl import DefaultMQProducerImpl, ProducerConfig
from .producer_parts import LatencyFaultTolerance, hash_selector, random_selector, split_batches
from .results import SendResult, SendStatus

log = logging.getLogger(__name__)

__all__ = [
    "AsyncProducer",
    "LatencyFaultTolerance",
    "Producer",
    "SendResult",
    "SendStatus",
    "hash_selector",
    "random_selector",
    "split_batches",
]

SendCallback = Callable[[SendResult | None, BaseException | None], None]

_CLIENT_KEYS = set(ClientConfig.__slots__)
_PRODUCER_KEYS = set(ProducerConfig.__slots__)


def split_options(group: str, namesrv_addr: str, options: dict) -> tuple[ClientConfig, dict]:
    """Client settings (shared by the instance) apart from the rest; unknown keys are errors."""
    client = {k: options.pop(k) for k in list(options) if k in _CLIENT_KEYS}
    return ClientConfig(namesrv_addr=namesrv_addr, **client), options


class _ProducerBase:
    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        send_timeout_ms: int | None = None,
        retry_times: int | None = None,
        compress_over: int | None = None,
        latency_fault_enable: bool | None = None,
        **options,
    ) -> None:
        self.client_config, rest = split_options(group, namesrv_addr, dict(options))
        aliases = {
            "send_msg_timeout_ms": send_timeout_ms,
            "retry_times_when_send_failed": retry_times,
            "compress_msg_body_over_howmuch": compress_over,
            "send_latency_fault_enable": latency_fault_enable,
        }
        rest.update({k: v for k, v in aliases.items() if v is not None})
        unknown = set(rest) - _PRODUCER_KEYS
        if unknown:
            raise TypeError(f"unknown producer options: {sorted(unknown)}")
        self.config = ProducerConfig(group=group, **rest)
        self.group = group
        self.instance: MQClientInstance | None = None
        self.impl: DefaultMQProducerImpl | None = None

    def _start_instance(self) -> MQClientInstance:
        if not self.group:
            raise MQClientError("the producer group is empty")
        self.instance = MQClientManager.get_instance(self.client_config)
        self.instance.start()
        self.impl = DefaultMQProducerImpl(self.config, self.instance)
        return self.instance

    def _impl(self) -> DefaultMQProducerImpl:
        if self.impl is None:
            raise MQClientError("the producer is not started")
        return self.impl

    def _send_coro(self, msg, queue, selector, arg, timeout_ms):
        impl = self._impl()
        if queue is not None:
            return impl.send_to_queue(msg, queue, timeout_ms)
        if selector is not None:
            return impl.send_select(msg, selector, arg, timeout_ms)
        return impl.send(msg, timeout_ms)


class Producer(_ProducerBase):
    """Blocking producer; ``start()`` returns the producer so it can be chained."""

    def start(self) -> Producer:
        instance = self._start_instance()
        instance.run(self.impl.start())
        self._callbacks = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=f"send-cb-{self.group}")
        return self

    def shutdown(self) -> None:
        if self.impl is None:
            return
        impl, self.impl = self.impl, None
        self.instance.run(impl.shutdown())
        self._callbacks.shutdown(wait=True)
        self.instance.shutdown_if_unused()

    def send(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector=None,
        arg=None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Sync send: to ``queue``, to ``selector(queues, msg, arg)``, or round robin with retries."""
        return self._impl().instance.run(self._send_coro(msg, queue, selector, arg, timeout_ms))

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        queue: MessageQueue | None = None,
        selector=None,
        arg=None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future:
        """Returns at once; ``callback(result, error)`` runs on a callback thread (never on the
        network loop, so a slow callback cannot stall other sends)."""
        future = self._impl().instance.submit(self._send_coro(msg, queue, selector, arg, timeout_ms))
        if callback is not None:
            future.add_done_callback(lambda f: self._callbacks.submit(_invoke_callback, callback, f))
        return future

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        self._impl().instance.run(self._impl().send_oneway(msg, queue))

    def send_batch(
        self, messages: list[Message], queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        return self._impl().instance.run(self._impl().send_batch(messages, queue, timeout_ms))


def _invoke_callback(callback: SendCallback, future: concurrent.futures.Future) -> None:
    error = future.exception()
    try:
        callback(None if error else future.result(), error)
    except Exception:
        log.exception("a send callback raised")


class AsyncProducer(_ProducerBase):
    """asyncio producer: ``await producer.start()``, ``await producer.send(msg)``."""

    async def start(self) -> AsyncProducer:
        instance = await asyncio.to_thread(self._start_instance)
        await instance.call(self.impl.start())
        return self

    async def shutdown(self) -> None:
        if self.impl is None:
            return
        impl, self.impl = self.impl, None
        await self.instance.call(impl.shutdown())
        await asyncio.to_thread(self.instance.shutdown_if_unused)

    async def send(self, msg, queue=None, selector=None, arg=None, timeout_ms=None) -> SendResult:
        return await self._impl().instance.call(self._send_coro(msg, queue, selector, arg, timeout_ms))

    def send_async(self, msg: Message, callback=None, queue=None, selector=None, arg=None) -> asyncio.Task:
        """A task sending ``msg``; ``callback(result, error)`` (plain or async) runs on this loop."""
        task = asyncio.ensure_future(self.send(msg, queue, selector, arg))
        if callback is not None:
            task.add_done_callback(lambda t: _invoke_async_callback(callback, t))
        return task

    async def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        await self._impl().instance.call(self._impl().send_oneway(msg, queue))

    async def send_batch(self, messages, queue=None, timeout_ms=None) -> list[SendResult]:
        return await self._impl().instance.call(self._impl().send_batch(messages, queue, timeout_ms))


def _invoke_async_callback(callback, task: asyncio.Task) -> None:
    if task.cancelled():
        return
    error = task.exception()
    outcome = callback(None if error else task.result(), error)
    if inspect.isawaitable(outcome):
        pending = asyncio.ensure_future(outcome)
        _PENDING_CALLBACKS.add(pending)
        pending.add_done_callback(_PENDING_CALLBACKS.discard)


_PENDING_CALLBACKS: set[asyncio.Future] = set()
