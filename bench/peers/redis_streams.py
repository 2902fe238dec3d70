"""Redis Streams: XADD, XREADGROUP + XACK (redis-py asyncio)."""

from __future__ import annotations

import asyncio

import redis.asyncio as redis

from .base import BODY_SIZE, LatencySamples, Peer, paced

STREAM, GROUP = "pyrocket-bench", "bench-group"
# The latency run's own stream (as every peer's latency run has its own topic, queue or stream).
LATENCY_STREAM = "pyrocket-bench-latency"


class RedisStreams(Peer):
    name = "redis"

    def __init__(self, url: str = "redis://127.0.0.1:6379/0") -> None:
        self.url = url

    async def setup(self) -> None:
        self.client = redis.from_url(self.url, socket_connect_timeout=5)
        await self.client.delete(STREAM)
        await self.client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)

    async def teardown(self) -> None:
        await self.client.delete(STREAM)
        await self.client.aclose()

    async def sync_send(self, count: int) -> None:
        body = b"x" * BODY_SIZE
        for _ in range(count):
            await self.client.xadd(STREAM, {"b": body})

    async def async_send(self, count: int, in_flight: int) -> None:
        # One connection pipelines: a window of 64 commands in flight at a time.
        body = b"x" * BODY_SIZE
        for _ in range(count // in_flight):
            pipe = self.client.pipeline(transaction=False)
            for _ in range(in_flight):
                pipe.xadd(STREAM, {"b": body})
            await pipe.execute()

    async def batch_send(self, count: int, batch: int) -> None:
        await self.async_send(count, batch)

    async def consume(self, count: int) -> None:
        received = 0
        while received < count:
            reply = await self.client.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=256, block=5000)
            ids = [message_id for _, entries in reply for message_id, _ in entries]
            if ids:
                await self.client.xack(STREAM, GROUP, *ids)
            received += len(ids)

    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        total = int(rate * seconds)
        samples = LatencySamples(total, asyncio.Event())
        last_id = "$"
        await self.client.delete(LATENCY_STREAM)
        reader = redis.from_url(self.url)

        async def read() -> None:
            nonlocal last_id
            while len(samples) < total:
                reply = await reader.xread({LATENCY_STREAM: last_id}, count=256, block=1000)
                for _, entries in reply:
                    for message_id, fields in entries:
                        samples.add(fields[b"b"])
                        last_id = message_id

        task = asyncio.create_task(read())
        await asyncio.sleep(0.1)
        await paced(rate, seconds, lambda body: self.client.xadd(LATENCY_STREAM, {"b": body}))
        await asyncio.wait_for(task, 60)
        await reader.aclose()
        await self.client.delete(LATENCY_STREAM)
        return samples
