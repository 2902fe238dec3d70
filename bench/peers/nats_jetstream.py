"""NATS JetStream: a file-storage stream, acknowledged publishes (nats-py)."""

from __future__ import annotations

import asyncio

import nats
from nats.js.api import StorageType
from nats.js.errors import NotFoundError

from .base import BODY_SIZE, LatencySamples, Peer, paced

STREAM, SUBJECT = "PYROCKET_BENCH", "pyrocket.bench"
# The latency run's own stream, new for the run, as every peer's latency run has its own topic,
# queue or stream: no peer is measured while it cleans up after the throughput runs (a purge).
LATENCY_STREAM, LATENCY_SUBJECT = "PYROCKET_LATENCY", "pyrocket.latency"


class NatsJetStream(Peer):
    name = "nats"

    def __init__(self, url: str = "nats://127.0.0.1:4222") -> None:
        self.url = url

    async def setup(self) -> None:
        self.nc = await nats.connect(self.url, connect_timeout=5, max_reconnect_attempts=0)
        self.js = self.nc.jetstream()
        await self._new_stream(STREAM, SUBJECT)

    async def _new_stream(self, name: str, subject: str) -> None:
        try:
            await self.js.delete_stream(name)
        except NotFoundError:
            pass
        await self.js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)

    async def teardown(self) -> None:
        await self.js.delete_stream(STREAM)
        await self.nc.close()

    async def sync_send(self, count: int) -> None:
        body = b"x" * BODY_SIZE
        for _ in range(count):
            await self.js.publish(SUBJECT, body)

    async def async_send(self, count: int, in_flight: int) -> None:
        body, slots = b"x" * BODY_SIZE, asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with slots:
                await self.js.publish(SUBJECT, body)

        await asyncio.gather(*(one() for _ in range(count)))

    async def batch_send(self, count: int, batch: int) -> None:
        # JetStream has no batch publish: a group goes out pipelined, then its acks are awaited.
        body = b"x" * BODY_SIZE
        for _ in range(count // batch):
            await asyncio.gather(*(self.js.publish(SUBJECT, body) for _ in range(batch)))

    async def consume(self, count: int) -> None:
        subscription = await self.js.pull_subscribe(SUBJECT, durable="bench-consumer")
        received = 0
        while received < count:
            for message in await subscription.fetch(256, timeout=10):
                await message.ack()
                received += 1
        await subscription.unsubscribe()

    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        await self._new_stream(LATENCY_STREAM, LATENCY_SUBJECT)
        samples = LatencySamples(int(rate * seconds), asyncio.Event())

        async def on_message(message) -> None:
            samples.add(message.data)
            await message.ack()

        subscription = await self.js.subscribe(
            LATENCY_SUBJECT, cb=on_message, deliver_policy=nats.js.api.DeliverPolicy.NEW
        )
        await paced(rate, seconds, lambda body: self.js.publish(LATENCY_SUBJECT, body))
        await asyncio.wait_for(samples.done.wait(), 60)
        await subscription.unsubscribe()
        await self.js.delete_stream(LATENCY_STREAM)
        return samples
