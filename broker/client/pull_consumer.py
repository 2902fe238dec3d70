"""``LitePullConsumer``: the application polls; subscribe (with rebalancing) or assign queues.

With ``commit_offsets=False`` it is a reader, as RocketMQ's admin tools read queues: each queue's
position lives in its pull loop only, nothing is read from or committed to a broker, and the
group is announced without subscriptions, so no broker counts it among a topic's consumers.
"""

from __future__ import annotations

import asyncio
import queue as queue_module
import time
from typing import Protocol

from broker.common.message import MessageExt
from broker.common.message_queue import MessageQueue

from .consumer_core import ConsumerCore
from .errors import MQClientError
from .offset_store import OffsetStore


class ReaderOffsetStore(OffsetStore):
    """A reader's progress: kept nowhere. ``read_memory`` stays -1, so no pull carries the
    commit flag; nothing is read from the brokers (a queue starts where ``consume_from_where``
    or a seek says) and nothing is persisted."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        pass

    async def read_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist(self, mqs) -> None:
        pass


class PulledBuffer(Protocol):
    """Where the pull loops put ``(queue, message)`` items for the application to poll."""

    maxsize: int

    def qsize(self) -> int: ...

    def put(self, item: tuple[MessageQueue, MessageExt]) -> None: ...


class LitePullConsumer(ConsumerCore):
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        auto_commit: bool = True,
        commit_offsets: bool = True,
        buffer_size: int = 10_000,
        **options,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.commit_offsets = commit_offsets  # False: a reader (see the module)
        self.auto_commit = auto_commit and commit_offsets
        # What ``poll`` waits on, a thread-safe queue; the asyncio consumer puts a buffer of its
        # loop in its place as ``buffer``.
        self._queue: queue_module.Queue[tuple[MessageQueue, MessageExt]] = queue_module.Queue(buffer_size)
        self.buffer: PulledBuffer = self._queue
        self.consumed: dict[MessageQueue, int] = {}
        self.pulled_max: dict[MessageQueue, int] = {}  # highest offset put in the buffer, by queue
        self._assigned_only: list[MessageQueue] | None = None
        self.paused: set[MessageQueue] = set()

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing)."""
        self._assigned_only = list(queues)
        for mq in queues:
            self.subscriptions.setdefault(mq.topic, "*")

    async def _allocate(self, topic: str) -> list[MessageQueue]:
        if self._assigned_only is not None:
            await self._client().route(topic, refresh=True)
            return [mq for mq in self._assigned_only if mq.topic == topic]
        return await super()._allocate(topic)

    def _offset_store(self) -> OffsetStore:
        return super()._offset_store() if self.commit_offsets else ReaderOffsetStore()

    def consumer_data(self) -> dict:
        data = super().consumer_data()
        if not self.commit_offsets:
            # A reader consumes nothing for good: brokers must not list its group among a
            # topic's consumers (QUERY_TOPIC_CONSUME_BY_WHO), where it would show as lagging.
            data["subscriptionDataSet"] = []
        return data

    async def afetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` from a fresh route (RocketMQ's fetchMessageQueues);
        empty when the name servers know no route of it."""
        route = await self._client().route(topic, refresh=True)
        return route.readable_queues() if route is not None else []

    async def amax_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of ``mq`` will get: ``aseek(mq, await amax_offset(mq))``
        reads only what comes next (``aseek(mq, 0)`` reads all it holds: the broker moves a pull
        below its first offset up to it)."""
        instance = self._client()
        addr = instance.pull_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(f"no address for {mq.broker_name}")
        return await instance.api.max_offset(addr, mq.topic, mq.queue_id)

    def start(self) -> LitePullConsumer:
        self._start_core()
        return self

    def shutdown(self) -> None:
        if self.auto_commit:
            self.commit_sync()
        self._shutdown_core()

    def poll(self, timeout_s: float = 5.0) -> list:
        """Messages pulled so far (up to a batch), waiting up to ``timeout_s`` for the first."""
        deadline = time.monotonic() + timeout_s
        items: list[tuple[MessageQueue, MessageExt]] = []
        while len(items) < self.pull_batch_size:
            remaining = deadline - time.monotonic()
            try:
                items.append(
                    self._queue.get(timeout=max(remaining, 0.001)) if not items else self._queue.get_nowait()
                )
            except queue_module.Empty:
                break
        return self._take(items)

    def _take(self, items: list) -> list:
        """The messages of ``(queue, message)`` items still ours; note (and auto-commit) progress."""
        return [msg for _, msg in self._take_with_queues(items)]

    def _take_with_queues(self, items: list) -> list[tuple[MessageQueue, MessageExt]]:
        """``_take``, each message with its queue."""
        batch = []
        for mq, msg in items:
            if mq not in self.assigned:
                continue  # the queue moved to another member meanwhile
            batch.append((mq, msg))
            self.consumed[mq] = max(self.consumed.get(mq, 0), msg.queue_offset + 1)
        if self.auto_commit:
            self._note_consumed()
        return batch

    def _note_consumed(self) -> None:
        for mq, offset in list(self.consumed.items()):
            self.offsets.update(mq, offset, increase_only=True)

    def commit_sync(self) -> None:
        self._client().run(self.acommit())

    async def acommit(self) -> None:
        """``commit_sync`` on the instance's loop."""
        self._note_consumed()
        # Queues where nothing was polled may still have moved past filtered-out messages.
        await self.offsets.persist(set(self.consumed) | set(self.assigned))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset`` (restarts its pulling)."""
        self._client().run(self.aseek(mq, offset))

    async def aseek(self, mq: MessageQueue, offset: int) -> None:
        """``seek`` on the instance's loop."""
        task = self.assigned.pop(mq, None)
        if task is not None:
            task.cancel()
        self.offsets.update(mq, offset)
        self.assigned[mq] = asyncio.create_task(self._pull_loop(mq, offset))

    def pause(self, queues: list[MessageQueue]) -> None:
        self.paused.update(queues)

    def resume(self, queues: list[MessageQueue]) -> None:
        self.paused.difference_update(queues)

    def is_busy(self, mq: MessageQueue) -> bool:
        return mq in self.paused or self.buffer.qsize() > self.buffer.maxsize * 0.8

    def has_in_flight(self, mq: MessageQueue) -> bool:
        # In flight until polled and committed (by auto-commit or the application's commit).
        return self.offsets.read_memory(mq) <= self.pulled_max.get(mq, -1)

    def on_queue_dropped(self, mq: MessageQueue) -> None:
        self.pulled_max.pop(mq, None)

    def on_messages(self, mq: MessageQueue, messages: list) -> None:
        for msg in messages:
            self.buffer.put((mq, msg))
        self.pulled_max[mq] = max(self.pulled_max.get(mq, -1), messages[-1].queue_offset)
