"""``Producer``: send messages (sync, async, oneway, batch) with RocketMQ's producer behaviour.

Routes come from the name servers (auto-created topics route through TBW102); a failed send is
retried on another broker; brokers that failed recently or answered slowly are avoided for a
while (latency fault tolerance, latency_fault.py); bodies over 4 KiB are compressed
(outgoing_message.py). A send that failed because its broker is gone or takes no writes refreshes
the topic's route at once (route_refresh.py), so a producer follows a failover by itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.common.acl_signature import SessionCredentials
from broker.common.batch_codec import encode_batch
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_id import create_unique_id
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import SendMessageRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.remoting.errors import RemotingError, RemotingTooMuchRequestError
from broker.remoting.tls import ClientTls

from . import request_reply
from .client_api import send_request
from .errors import MQBrokerError, MQClientError
from .instance import MQClientInstance
from .latency_fault import LatencyFaultTolerance
from .outgoing_message import send_header_and_body, split_batches
from .route_refresh import NoMasterError, RouteRefresher, wait_for
from .send_result import SEND_STATUS, SendResult, retryable, send_failed, send_result
from .send_window import DEFAULT_MAX_BYTES, DEFAULT_MAX_MESSAGES, SendWindow

if TYPE_CHECKING:
    from .trace.dispatcher import AsyncTraceDispatcher

__all__ = ["Producer", "SendResult"]


@dataclass(slots=True)
class _Send:
    """One message on its way: what every attempt of it needs."""

    msg: Message
    header: SendMessageRequestHeader
    body: bytes
    queue: MessageQueue | None
    selector: Callable | None
    arg: object
    deadline: float  # time.monotonic() by which it must be done


class Producer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        send_timeout_ms: int = 3000,
        retry_times: int = 2,
        compress_over: int = 4096,
        latency_fault_enable: bool = True,
        default_topic_queue_nums: int = 4,
        instance: MQClientInstance | None = None,
        instance_name: str | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        max_async_in_flight: int = DEFAULT_MAX_MESSAGES,
        max_async_in_flight_bytes: int = DEFAULT_MAX_BYTES,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        self.group = group
        self.credentials = credentials  # ACL: the instance signs every request with them
        self.tls = tls  # TLS to name servers and brokers; None: ROCKETMQ_TLS_* from the environment
        # Message trace: send records go to the trace topic (RMQ_SYS_TRACE_TOPIC by default).
        self.enable_trace, self.trace_topic = enable_trace, trace_topic
        self.send_hooks: list[Callable] = []  # hook(mq, broker_addr, header, body, response, cost_ms)
        self.trace_dispatcher: AsyncTraceDispatcher | None = None
        # Part of the client id; producers of one process that receive replies need distinct ones.
        self.instance_name = instance_name
        self.namesrv_addr = namesrv_addr
        self.send_timeout_ms = send_timeout_ms
        self.retry_times = retry_times
        self.compress_over = compress_over
        self.default_topic_queue_nums = default_topic_queue_nums
        self.faults = LatencyFaultTolerance() if latency_fault_enable else None
        # How many async sends (and bytes) may await answers at once: send_window.py.
        self.async_window = SendWindow(max_async_in_flight, max_async_in_flight_bytes)
        self.instance = instance
        self._routes: RouteRefresher | None = None  # of the instance it runs on: _route_refresher
        self._counter = itertools.count(random.randrange(1000))
        # Every topic it has sent to, route or not: the instance keeps polling their routes (as
        # RocketMQ's topicPublishInfoTable), so a broker that was gone hears from it again.
        self.publish_topics: set[str] = set()

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> Producer:
        instance = self.instance or MQClientInstance.shared(
            self.namesrv_addr, self.instance_name, credentials=self.credentials, tls=self.tls
        )
        instance.join("producer", self.group, self)
        self.instance = instance
        instance.start()
        self._install_trace()
        return self

    def _route_refresher(self) -> RouteRefresher | None:
        """The refresher of the instance the producer runs on now (started here or by the
        asyncio API); None before it runs."""
        instance, routes = self.instance, self._routes
        if instance is None:
            return None
        if routes is None or routes.instance is not instance:
            faults = self.faults
            routes = self._routes = RouteRefresher(instance, faults.forget if faults is not None else None)
        return routes

    def _install_trace(self) -> None:
        """The trace dispatcher (blocking: its own producer starts)."""
        if self.enable_trace and self.trace_dispatcher is None:
            from .trace import install_producer_trace

            self.trace_dispatcher = install_producer_trace(self, self.trace_topic)

    def _release_trace(self) -> None:
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    def shutdown(self) -> None:
        self._release_trace()
        if self.instance is not None:
            self.instance.call_soon(self.fail_queued_sends)
            self.instance.leave("producer", self.group, self)

    # -- sync API -----------------------------------------------------------------------------
    def send(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector=None,
        arg=None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        instance = self._instance()
        instance.check_not_in_loop()
        answer = _Answer()
        instance.call_soon(self._start_send, msg, queue, selector, arg, timeout_ms, answer.settle)
        return answer.wait()

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
        queue: MessageQueue | None = None,
    ) -> concurrent.futures.Future:
        instance = self._instance()
        future = _running_future()
        if instance.in_loop():  # the loop cannot wait for itself: queued there instead
            self.start_async_when_room(msg, queue, future)
        else:
            try:  # as RocketMQ's tryAcquire: the calling thread waits for room
                left_s = self.async_window.reserve(len(msg.body or b""), self.send_timeout_ms / 1000)
            except RemotingTooMuchRequestError as exc:
                future.set_exception(exc)
            else:
                instance.call_soon(self.start_async_when_room, msg, queue, future, left_s, True)
        if callback is not None:
            future.add_done_callback(lambda f: callback(None if f.exception() else f.result(), f.exception()))
        return future

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        self._instance().run(self.asend_oneway(msg, queue))

    def send_batch(self, messages: list[Message], queue: MessageQueue | None = None) -> list[SendResult]:
        return self._instance().run(self.asend_batch(messages, queue))

    def request(self, msg: Message, timeout_ms: int = 3000, **send_options):
        """Send ``msg`` and return the reply message; ``RequestTimeoutError`` when none comes in time.
        ``send_options``: ``queue``, or ``selector`` and ``arg``, as for ``send``."""
        return self._instance().run(request_reply.request(self, msg, timeout_ms, **send_options))

    def request_async(
        self, msg: Message, callback=None, timeout_ms: int = 3000, **send_options
    ) -> concurrent.futures.Future:
        """As ``request`` without blocking: ``callback(reply, error)`` runs when it completes."""
        future = self._instance().submit(request_reply.request(self, msg, timeout_ms, **send_options))
        if callback is not None:
            future.add_done_callback(lambda f: callback(None if f.exception() else f.result(), f.exception()))
        return future

    def _instance(self) -> MQClientInstance:
        if self.instance is None:
            raise MQClientError("the producer is not started")
        return self.instance

    # -- asyncio API (runs on the instance's loop; use the sync methods from other threads) ---
    async def asend(self, msg, queue=None, selector=None, arg=None, timeout_ms=None) -> SendResult:
        """One send with retries on other brokers. When the route and the connection are cached
        the first attempt goes by callback (no task, no coroutine chain), else the full path."""
        send = self._new_send(msg, queue, selector, arg, timeout_ms)
        future = asyncio.get_running_loop().create_future()
        if self._send_fast(send, _settler(future)):
            return await future
        return await self._send_attempts(send)

    def _new_send(self, msg, queue, selector, arg, timeout_ms) -> _Send:
        header, body = self._prepare(msg)
        deadline = time.monotonic() + (timeout_ms or self.send_timeout_ms) / 1000
        return _Send(msg, header, body, queue, selector, arg, deadline)

    async def _send_attempts(
        self, send: _Send, attempts=None, last_broker=None, last_error=None
    ) -> SendResult:
        """The full path: route (fetched if need be), then up to ``attempts`` tries, each on
        another broker than the one before."""
        msg, queue = send.msg, send.queue
        if last_error is None:
            queues: list[MessageQueue] | None = await self._queues(msg.topic)
        else:  # the fast path's attempt failed
            queues = await self._queues_after(msg.topic, last_error, None)
        for _ in range(1 + self.retry_times if attempts is None else attempts):
            if queues is None:  # no master for the topic now: another attempt would fail the same way
                break
            target = queue or self._select(queues, msg, send.selector, send.arg, last_broker)
            remaining = int((send.deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            try:
                return await self._send_to(target, send.header, send.body, remaining, msg.unique_key or "")
            except (RemotingError, MQBrokerError, NoMasterError) as exc:
                last_broker, last_error = target.broker_name, exc
                if not retryable(exc):
                    raise
                if queue is not None:
                    break
                queues = await self._queues_after(msg.topic, exc, queues)
        raise send_failed(msg, last_error)

    def _note_failure(self, topic: str, error: BaseException) -> asyncio.Task | None:
        """A failed attempt: when the error says the master may have moved (unreachable, or no
        writes taken), the topic's route is refreshed (route_refresh.py: at most once per topic
        per second, so every attempt of a burst gets the same refresh); that refresh, or None."""
        routes = self._route_refresher()
        return routes.after_failure(topic, error) if routes is not None else None

    async def _queues_after(
        self, topic: str, error: BaseException, queues: list[MessageQueue] | None
    ) -> list[MessageQueue] | None:
        """The queues for the next attempt after ``error``: by the refreshed route when the error
        asked for one (``_note_failure``; the one ``_send_to`` started, if it did), else
        ``queues`` (the route as cached when None); None when the topic has none now."""
        refresh = self._note_failure(topic, error)
        if refresh is None and queues is not None:
            return queues
        await wait_for(refresh)
        try:
            return await self._queues(topic)
        except MQClientError:
            return None

    async def asend_oneway(self, msg, queue=None) -> None:
        header, body = self._prepare(msg)
        target = queue or self._select(await self._queues(msg.topic), msg, None, None, None)
        addr = self._addr(target)
        header.queue_id = target.queue_id
        await self._instance().api.send_oneway(addr, header, body)

    async def asend_batch(self, messages: list[Message], queue=None) -> list[SendResult]:
        results = []
        for chunk in split_batches(messages):
            for msg in chunk:
                msg.unique_key = msg.unique_key or create_unique_id()
            header, _ = self._prepare(chunk[0], for_batch=True)
            target = queue or self._select(await self._queues(chunk[0].topic), chunk[0], None, None, None)
            ids = ",".join(m.unique_key or "" for m in chunk)
            body = encode_batch(chunk)
            results.append(await self._send_to(target, header, body, self.send_timeout_ms, ids))
        return results

    # -- async sends through the window (send_window.py) --------------------------------------
    def start_async_when_room(self, msg, queue, future, timeout_s=None, reserved=False) -> None:
        """On the instance's loop: start an async send once the window has room for it, or fail
        ``future`` with ``RemotingTooMuchRequestError`` when ``timeout_s`` (by default its send
        timeout) passes first. ``reserved``: a thread reserved the room (``SendWindow.reserve``)."""
        window, size = self.async_window, len(msg.body or b"")
        if reserved:
            window.arrived(size)
        settled = _settler(future, window, size)
        if window.try_enter(size):  # the usual case: room now
            self._start_send(msg, queue, None, None, None, settled)
            return
        window.enter_later(
            size,
            self.send_timeout_ms / 1000 if timeout_s is None else timeout_s,
            lambda: self._start_send(msg, queue, None, None, None, settled),
            lambda error: _settler(future)(None, error),  # never entered: nothing to leave
        )

    def fail_queued_sends(self) -> None:
        """On the instance's loop, as the producer stops: async sends still waiting for room fail."""
        self.async_window.fail_queued(MQClientError("the producer was shut down before the send found room"))

    # -- the callback fast path (runs on the instance's loop) ---------------------------------
    def _start_send(self, msg, queue, selector, arg, timeout_ms, settle) -> None:
        """Start a send; ``settle(result, error)`` runs once it is over: by callback when the
        route and connection are at hand, else through a task running the full path."""
        try:
            send = self._new_send(msg, queue, selector, arg, timeout_ms)
            if self._send_fast(send, settle):
                return
        except Exception as exc:
            settle(None, exc)
            return
        self._spawn(self._send_attempts(send), settle)

    def _send_fast(self, send: _Send, settle) -> bool:
        """One attempt through ``invoke_with_callback``; False when nothing was sent because the
        route or the connection is not cached yet. A failed attempt goes on in the full path
        with the retries left, as ``asend`` would."""
        msg, header = send.msg, send.header
        instance = self._instance()
        queues = instance.write_queues.get(msg.topic)
        if not queues:
            return False
        target = send.queue or self._select(queues, msg, send.selector, send.arg, None)
        addr = instance.master_addrs.get(target.broker_name)
        if addr is None:
            return False
        connection = instance.remoting.cached_connection(addr)
        timeout_ms = int((send.deadline - time.monotonic()) * 1000)
        if connection is None or timeout_ms <= 0:
            return False
        header.queue_id = target.queue_id
        request = send_request(header, send.body)
        started = time.monotonic()

        def on_response(response, error) -> None:
            if error is None and response.code in SEND_STATUS:
                self._note_latency(target.broker_name, started, isolation=False)
                if self.send_hooks:
                    cost_ms = int((time.monotonic() - started) * 1000)
                    for hook in self.send_hooks:
                        _run_send_hook(hook, target, addr, header, send.body, response, cost_ms)
                settle(self._result(response, target, msg.unique_key or ""), None)
                return
            self._note_latency(target.broker_name, started, isolation=True)
            error = error or MQBrokerError(response.code, response.remark, addr)
            self._note_failure(msg.topic, error)  # the retry below waits for it; a next send too
            if not retryable(error):
                settle(None, error)
            elif send.queue is not None:
                settle(None, send_failed(msg, error))
            else:
                self._spawn(self._send_attempts(send, self.retry_times, target.broker_name, error), settle)

        connection.invoke_with_callback(request, timeout_ms, on_response)
        return True

    def _spawn(self, coro, settle) -> None:
        """Run ``coro`` as a task of the instance's loop and hand its outcome to ``settle``."""

        def copy_outcome(task: asyncio.Task) -> None:
            if task.cancelled():
                settle(None, asyncio.CancelledError())
            else:
                error = task.exception()
                settle(None if error else task.result(), error)

        task = self._instance().spawn(coro)
        if task is None:
            settle(None, MQClientError("the producer is shutting down"))
        else:
            task.add_done_callback(copy_outcome)

    def _note_latency(self, broker_name: str, started: float, isolation: bool) -> None:
        if self.faults:
            self.faults.update(broker_name, (time.monotonic() - started) * 1000, isolation=isolation)

    @staticmethod
    def _result(response, mq: MessageQueue, msg_id: str) -> SendResult:
        return send_result(response, mq, msg_id)

    # -- internals ----------------------------------------------------------------------------
    def _prepare(self, msg: Message, for_batch: bool = False) -> tuple[SendMessageRequestHeader, bytes]:
        return send_header_and_body(
            msg, self.group, self.compress_over, self.default_topic_queue_nums, for_batch
        )

    async def _queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues; for a topic without a route, those it would get on the
        brokers that may auto-create it (the default topic's route), which register it."""
        instance = self._instance()
        self.publish_topics.add(topic)
        await instance.route(topic)
        queues = instance.write_queues.get(topic)
        if queues:
            return queues
        routes = self._route_refresher()
        if topic in instance.routes and routes is not None:
            # A route without a writable queue (its masters gone): asked again, at most once a
            # second (RocketMQ's client asks at every send then), so a new master is found.
            await wait_for(routes.refresh(topic))
            queues = instance.write_queues.get(topic)
            if queues:
                return queues
        default = await instance.route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        if default is None or not instance.write_queues.get(AUTO_CREATE_TOPIC_KEY_TOPIC):
            raise MQClientError(f"no route info of this topic: {topic}", ResponseCode.TOPIC_NOT_EXIST)
        nums = min(self.default_topic_queue_nums, max(q.write_queue_nums for q in default.queue_datas))
        masters = [b.broker_name for b in default.broker_datas if b.master_addr]
        return [MessageQueue(topic, name, i) for name in masters for i in range(nums)]

    def _select(
        self, queues: list[MessageQueue], msg, selector, arg, last_broker: str | None
    ) -> MessageQueue:
        if selector is not None:
            return selector(queues, msg, arg)
        start = next(self._counter)
        for i in range(len(queues)):
            candidate = queues[(start + i) % len(queues)]
            # (With one broker every candidate is skipped, and the choice below is the same.)
            if candidate.broker_name == last_broker:
                continue
            if self.faults is None or self.faults.is_available(candidate.broker_name):
                return candidate
        others = [q for q in queues if q.broker_name != last_broker] or queues
        return others[start % len(others)]

    def _addr(self, mq: MessageQueue) -> str:
        addr = self._instance().broker_addr(mq.broker_name)
        if addr is None:
            raise NoMasterError(f"the broker {mq.broker_name} is not in any route")
        return addr

    async def _send_to(
        self,
        mq: MessageQueue,
        header: SendMessageRequestHeader,
        body: bytes,
        timeout_ms: int,
        msg_id: str = "",
    ) -> SendResult:
        addr = self._addr(mq)
        header.topic, header.queue_id = mq.topic, mq.queue_id
        started = time.monotonic()
        try:
            response = await self._instance().api.send(addr, header, body, timeout_ms)
        except (RemotingError, MQBrokerError) as exc:
            self._note_latency(mq.broker_name, started, isolation=True)
            self._note_failure(mq.topic, exc)
            raise
        self._note_latency(mq.broker_name, started, isolation=False)
        for hook in self.send_hooks:
            _run_send_hook(hook, mq, addr, header, body, response, int((time.monotonic() - started) * 1000))
        return self._result(response, mq, msg_id)


def _running_future() -> concurrent.futures.Future:
    """A future the loop thread completes; running already, so the caller cannot cancel it
    under the loop's feet."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    return future


class _Answer:
    """The answer a blocking ``send`` waits for, settled once by the loop thread: one lock held
    until then. A ``concurrent.futures.Future`` does the same with a condition, a waiter lock
    made per wait and a callback list: measured with bench/sync_send_path.py (callgrind, both
    threads), about 39,000 instructions more per send, a fifth of the producer's whole cost."""

    __slots__ = ("_error", "_result", "_settled", "_unset")

    def __init__(self) -> None:
        self._unset = threading.Lock()
        self._unset.acquire()
        self._settled = False
        self._result: SendResult | None = None
        self._error: BaseException | None = None

    def settle(self, result, error) -> None:
        """On the loop thread; the first call counts (as ``_settler``'s)."""
        if self._settled:
            return
        self._settled = True
        self._result, self._error = result, error
        self._unset.release()

    def wait(self) -> SendResult:
        self._unset.acquire()
        if self._error is not None:
            raise self._error
        assert self._result is not None  # settled with one or the other
        return self._result


def _settler(future, window: SendWindow | None = None, size: int = 0):
    """``settle(result, error)`` for a future: an ``asyncio.Future`` of the instance's loop (a
    cancelled waiter leaves it done: nothing to settle then), or a running
    ``concurrent.futures.Future`` a thread waits on. With ``window``: an async send that entered
    it, whose room is given back at its (first) settling — even if its waiter was cancelled."""

    def settle(result, error) -> None:
        nonlocal window
        if window is not None:
            entered: SendWindow = window
            window = None  # left once
            entered.leave(size)
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    return settle


def _run_send_hook(hook, *args) -> None:
    try:
        hook(*args)
    except Exception:  # a hook (tracing, metrics) must never fail the application's send
        logging.getLogger(__name__).exception("a send hook failed")
