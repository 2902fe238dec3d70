"""One reader per tailed topic, fanning new messages out to a Channels group.

The reader is the SDK's lite pull consumer in reader mode (``commit_offsets=False``): it is
assigned every readable queue of the topic, never commits an offset, and each queue starts at its
end when tailing starts and advances in memory. Pulls use long polling, so a message is
forwarded the moment the broker dispatches it rather than on the next poll. The route is re-read
every few seconds so a topic that grows (or a broker that joins) is followed.

It pulls under RocketMQ's tools group (``TOOLS_CONSUMER``, a system group the console lists only
when asked) as a broadcasting member with no subscription: every web process reads every queue
for itself, and no broker counts it among the topic's consumers or creates a retry topic for it.
Each pump has its own client instance (one connection pool per tailed topic, its own client id).

A pump lives in the ASGI process that serves the sockets watching it, and its group name
carries a per-process token: with the Redis channel layer and several web processes, each
process's pump feeds only its own sockets, so nobody receives a message twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import time
from dataclasses import dataclass, field

from channels.layers import get_channel_layer

from broker.client import BROADCASTING, AsyncLitePullConsumer, MessageQueue
from broker.common.system_names import TOOLS_CONSUMER_GROUP
from core.cluster_access import client_credentials, client_tls

from .serialize import message_event

log = logging.getLogger(__name__)

_PROCESS_TOKEN = f"{os.getpid()}{secrets.token_hex(3)}"


@dataclass
class TailSettings:
    route_refresh_s: float = 5.0
    batch: int = 32
    # Events of all queues are coalesced for this long into one channel-layer message: at hundreds
    # of messages a second, one group_send per pull would overflow the layer's per-channel capacity
    # (messages dropped) and cost more than the wait.
    flush_interval_s: float = 0.03
    flush_max_events: int = 256


def group_name(topic: str) -> str:
    # Channels group names allow only ASCII letters, digits, '-', '_' and '.'; topics may hold '%'.
    digest = hashlib.sha1(topic.encode()).hexdigest()[:24]
    return f"tail.{_PROCESS_TOKEN}.{digest}"


def _reader(namesrv_addr: str, settings: TailSettings) -> AsyncLitePullConsumer:
    return AsyncLitePullConsumer(
        TOOLS_CONSUMER_GROUP,
        namesrv_addr,
        commit_offsets=False,
        message_model=BROADCASTING,
        pull_batch_size=settings.batch,
        # Its own instance: a pump stopping while the next one of its topic starts must not share
        # (and be refused) a client id, and each pump's connections close with it.
        instance_name=f"console-tail-{secrets.token_hex(6)}",
        credentials=client_credentials(),  # the console's ACL account, as its other clients
        tls=client_tls(),  # and its TLS settings
    )


@dataclass
class TopicPump:
    topic: str
    namesrv_addr: str
    settings: TailSettings = field(default_factory=TailSettings)
    subscribers: int = 0
    forwarded: int = 0
    task: asyncio.Task | None = None
    _followed: set[MessageQueue] = field(default_factory=set)
    _outbox: list = field(default_factory=list)
    _listed: bool = False  # the route has been read once: later queues are new ones

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"tail:{self.topic}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        layer = get_channel_layer()
        reader = await self._started_reader(layer)
        wake = asyncio.Event()  # the poll loop's word to flush before the interval when the outbox fills
        helpers = [
            asyncio.create_task(self._flush_loop(layer, wake)),
            asyncio.create_task(self._poll_loop(reader, wake)),
        ]
        try:
            while True:
                await self._follow_route(reader, layer)
                await asyncio.sleep(self.settings.route_refresh_s)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await reader.shutdown()

    async def _started_reader(self, layer) -> AsyncLitePullConsumer:
        while True:
            try:
                # Made here: half-configured ACL credentials are reported like a failed start.
                reader = _reader(self.namesrv_addr, self.settings)
                reader.assign([])  # queues are added as the route shows them
                return await reader.start()
            except Exception as exc:  # e.g. no name server configured: say so, and try again
                await self._notify(layer, {"type": "tail.status", "status": "error", "reason": str(exc)})
            await asyncio.sleep(self.settings.route_refresh_s)

    async def _follow_route(self, reader: AsyncLitePullConsumer, layer) -> None:
        try:
            queues = await reader.fetch_message_queues(self.topic)
        except Exception as exc:  # no name server answered: keep what is followed, retry later
            await self._notify(layer, {"type": "tail.status", "status": "error", "reason": str(exc)})
            return
        if not queues:
            self._listed = True  # the topic did not exist when tailing started: all it gets is new
            await self._notify(layer, {"type": "tail.status", "status": "waiting", "reason": "no route yet"})
            return
        failure = await self._start_new_queues(reader, queues)
        if failure is not None:  # a broker of the route is down: keep the others, retry later
            await self._notify(layer, {"type": "tail.status", "status": "error", "reason": failure})
            return
        self._listed = True
        await self._notify(layer, {"type": "tail.status", "status": "live", "queues": len(self._followed)})

    async def _start_new_queues(
        self, reader: AsyncLitePullConsumer, queues: list[MessageQueue]
    ) -> str | None:
        """Follow each queue not followed yet; the first failure, if any. Queues present when
        tailing starts begin at their end; queues that appear later (the topic was created, or
        grew, after tailing started) at their beginning, since all they hold is new to this tail."""
        starts: dict[MessageQueue, int] = {}
        failure = None
        for mq in queues:
            if mq in self._followed or mq in starts:
                continue
            try:
                starts[mq] = 0 if self._listed else await reader.max_offset(mq)
            except Exception as exc:
                failure = failure or str(exc)
        if starts:
            # Assigned and started with no await in between (a seek only starts a task): the
            # reader's periodic rebalance never finds a queue assigned but not started, which it
            # would start where it sees fit.
            self._followed.update(starts)
            reader.assign(sorted(self._followed))
            for mq, offset in starts.items():
                await reader.seek(mq, offset)
        return failure

    async def _poll_loop(self, reader: AsyncLitePullConsumer, wake: asyncio.Event) -> None:
        while True:
            pulled = await reader.poll_with_queues(timeout_s=1.0)
            self._outbox.extend(message_event(message, mq.broker_name) for mq, message in pulled)
            if len(self._outbox) >= self.settings.flush_max_events:
                wake.set()

    async def _flush_loop(self, layer, wake: asyncio.Event) -> None:
        group = group_name(self.topic)
        while True:
            try:
                await asyncio.wait_for(wake.wait(), self.settings.flush_interval_s)
            except TimeoutError:
                pass
            wake.clear()
            if not self._outbox:
                continue
            events, self._outbox = self._outbox, []
            received = int(time.time() * 1000)
            await layer.group_send(group, {"type": "tail.messages", "events": events, "received": received})
            self.forwarded += len(events)

    async def _notify(self, layer, event: dict) -> None:
        await layer.group_send(group_name(self.topic), event)


class PumpRegistry:
    """The pumps of this process, started by the first socket of a topic, stopped by the last."""

    def __init__(self) -> None:
        self.pumps: dict[str, TopicPump] = {}
        self.settings = TailSettings()

    async def subscribe(self, topic: str, namesrv_addr: str) -> TopicPump:
        pump = self.pumps.get(topic)
        if pump is None or pump.task is None or pump.task.done():
            pump = self.pumps[topic] = TopicPump(topic, namesrv_addr, self.settings)
            pump.start()
        pump.subscribers += 1
        return pump

    async def unsubscribe(self, topic: str) -> None:
        pump = self.pumps.get(topic)
        if pump is None:
            return
        pump.subscribers -= 1
        if pump.subscribers <= 0:
            del self.pumps[topic]
            await pump.stop()


registry = PumpRegistry()
