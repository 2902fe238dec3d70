"""One pull loop per tailed topic, fanning new messages out to a Channels group.

The loop never commits an offset: each queue starts at its max offset when tailing starts and
advances in memory. Pulls use long polling, so a message is forwarded the moment the broker
dispatches it rather than on the next poll. Queues are re-read from the route every few seconds
so a topic that grows (or a broker that joins) is followed.

A pump lives in the ASGI process that serves the sockets watching it, and its group name
carries a per-process token: with the Redis channel layer and several web processes, each
process's pump feeds only its own sockets, so nobody receives a message twice.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import secrets
import time
from dataclasses import dataclass, field

from channels.layers import get_channel_layer

from broker.client.admin import AsyncMQAdmin, MQAdminError, NotFoundError
from broker.client.client_api import ClientAPI
from broker.common.codes import ResponseCode
from broker.common.pull_sysflag import build_pull_sys_flag
from broker.common.request_headers import PullMessageRequestHeader
from broker.remoting.client import RemotingClient

from .serialize import message_event

log = logging.getLogger(__name__)

TAIL_GROUP = "CONSOLE_TAIL"  # the consumer group named in pulls; no offset is ever committed
_PROCESS_TOKEN = f"{os.getpid()}{secrets.token_hex(3)}"


@dataclass
class TailSettings:
    suspend_ms: int = 5000  # long-polling hold on the broker
    route_refresh_s: float = 5.0
    batch: int = 32
    error_backoff_s: float = 1.0
    # Events of all queues are coalesced for this long into one channel-layer message: at hundreds
    # of messages a second, one group_send per pull would overflow the layer's per-channel capacity
    # (messages dropped) and cost more than the wait.
    flush_interval_s: float = 0.03
    flush_max_events: int = 256


def group_name(topic: str) -> str:
    # Channels group names allow only ASCII letters, digits, '-', '_' and '.'; topics may hold '%'.
    digest = hashlib.sha1(topic.encode()).hexdigest()[:24]
    return f"tail.{_PROCESS_TOKEN}.{digest}"


@dataclass
class TopicPump:
    topic: str
    namesrv_addr: str
    settings: TailSettings = field(default_factory=TailSettings)
    subscribers: int = 0
    forwarded: int = 0
    task: asyncio.Task | None = None
    _queues: dict[tuple[str, int], asyncio.Task] = field(default_factory=dict)
    _outbox: list = field(default_factory=list)
    _wake: asyncio.Event | None = None
    _listed: bool = False  # the route has been read once: later queues are new ones

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"tail:{self.topic}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        admin = AsyncMQAdmin(self.namesrv_addr)
        remoting = RemotingClient()
        api = ClientAPI(remoting)
        layer = get_channel_layer()
        self._wake = asyncio.Event()
        flusher = asyncio.create_task(self._flush_loop(layer))
        try:
            while True:
                await self._follow_route(admin, api, layer)
                await asyncio.sleep(self.settings.route_refresh_s)
        finally:
            flusher.cancel()
            for task in self._queues.values():
                task.cancel()
            await asyncio.gather(flusher, *self._queues.values(), return_exceptions=True)
            await admin.close()
            await remoting.close()

    async def _follow_route(self, admin: AsyncMQAdmin, api: ClientAPI, layer) -> None:
        try:
            route = await admin.topic_route(self.topic)
        except NotFoundError:
            self._listed = True  # the topic did not exist when tailing started: all it gets is new
            await self._notify(layer, {"type": "tail.status", "status": "waiting", "reason": "no route yet"})
            return
        except MQAdminError as exc:
            await self._notify(layer, {"type": "tail.status", "status": "error", "reason": str(exc)})
            return
        try:
            await self._start_new_queues(admin, api, route)
        except MQAdminError as exc:  # a broker of the route is down: keep the others, retry later
            await self._notify(layer, {"type": "tail.status", "status": "error", "reason": str(exc)})
            return
        self._listed = True
        await self._notify(layer, {"type": "tail.status", "status": "live", "queues": len(self._queues)})

    async def _start_new_queues(self, admin: AsyncMQAdmin, api: ClientAPI, route) -> None:
        """A pull loop for each queue not followed yet. Queues present when tailing starts begin at
        their max offset; queues that appear later (the topic was created, or grew, after tailing
        started) begin at their min offset, since all they hold is new to this tail."""
        for queue_data in route.queue_datas:
            addr = route.broker(queue_data.broker_name).master_addr
            if not addr:
                continue
            for queue_id in range(queue_data.read_queue_nums):
                key = (queue_data.broker_name, queue_id)
                if key in self._queues and not self._queues[key].done():
                    continue
                if self._listed and key not in self._queues:
                    start = await admin.min_offset(addr, self.topic, queue_id)
                else:
                    start = await admin.max_offset(addr, self.topic, queue_id)
                self._queues[key] = asyncio.create_task(
                    self._pull_loop(api, queue_data.broker_name, addr, queue_id, start)
                )

    async def _pull_loop(
        self, api: ClientAPI, broker_name: str, addr: str, queue_id: int, offset: int
    ) -> None:
        found = functools.partial(self._found, broker_name)
        while True:
            header = PullMessageRequestHeader(
                TAIL_GROUP,
                self.topic,
                queue_id,
                offset,
                self.settings.batch,
                build_pull_sys_flag(commit_offset=False, suspend=True, subscription=True),
                commit_offset=0,
                suspend_timeout_millis=self.settings.suspend_ms,
                sub_version=0,
                subscription="*",
                expression_type="TAG",
            )
            try:
                code, fields = await api.pull(addr, header, self.settings.suspend_ms + 5000, found)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker restart must not end the tail: retry after a pause
                log.info("tail pull %s/%s@%s failed: %s", self.topic, queue_id, addr, exc)
                await asyncio.sleep(self.settings.error_backoff_s)
                continue
            next_offset = fields.next_begin_offset
            offset = max(next_offset, offset) if code != ResponseCode.PULL_OFFSET_MOVED else next_offset

    def _found(self, broker_name: str, messages: list) -> None:
        self._outbox.extend(message_event(m, broker_name) for m in messages)
        if len(self._outbox) >= self.settings.flush_max_events:
            self._wake.set()

    async def _flush_loop(self, layer) -> None:
        group = group_name(self.topic)
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.settings.flush_interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
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
