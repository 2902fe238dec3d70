"""RabbitMQ: a durable queue, persistent messages, publisher confirms (aio-pika)."""

from __future__ import annotations

import asyncio

import aio_pika

from .base import BODY_SIZE, LatencySamples, Peer, paced

QUEUE = "pyrocket-bench"
# The latency run's own queue, new for the run (as every peer's latency run has its own topic,
# queue or stream: none is measured while it cleans up after the throughput runs).
LATENCY_QUEUE = "pyrocket-bench-latency"


class RabbitMQ(Peer):
    name = "rabbitmq"

    def __init__(self, url: str = "amqp://guest:guest@127.0.0.1:5672/") -> None:
        self.url = url

    async def setup(self) -> None:
        self.connection = await aio_pika.connect_robust(self.url, timeout=5)
        self.channel = await self.connection.channel(publisher_confirms=True)
        await self.channel.set_qos(prefetch_count=256)
        self.queue = await self.channel.declare_queue(QUEUE, durable=True)
        await self.queue.purge()

    async def teardown(self) -> None:
        await self.queue.delete(if_unused=False, if_empty=False)
        await self.connection.close()

    def _message(self, body: bytes | None = None) -> aio_pika.Message:
        return aio_pika.Message(body or b"x" * BODY_SIZE, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)

    async def _publish(self, body: bytes | None = None, queue: str = QUEUE) -> None:
        await self.channel.default_exchange.publish(self._message(body), routing_key=queue)

    async def sync_send(self, count: int) -> None:
        for _ in range(count):
            await self._publish()

    async def async_send(self, count: int, in_flight: int) -> None:
        slots = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with slots:
                await self._publish()

        await asyncio.gather(*(one() for _ in range(count)))

    async def batch_send(self, count: int, batch: int) -> None:
        # AMQP has no batch frame: publish a group, then wait for all its confirms.
        for _ in range(count // batch):
            await asyncio.gather(*(self._publish() for _ in range(batch)))

    async def consume(self, count: int) -> None:
        received = 0
        async with self.queue.iterator() as messages:
            async for message in messages:
                await message.ack()
                received += 1
                if received >= count:
                    break

    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        queue = await self.channel.declare_queue(LATENCY_QUEUE, durable=True)
        await queue.purge()
        samples = LatencySamples(int(rate * seconds), asyncio.Event())

        async def on_message(message: aio_pika.IncomingMessage) -> None:
            samples.add(message.body)
            await message.ack()

        tag = await queue.consume(on_message)
        await paced(rate, seconds, lambda body: self._publish(body, LATENCY_QUEUE))
        await asyncio.wait_for(samples.done.wait(), 60)
        await queue.cancel(tag)
        await queue.delete(if_unused=False, if_empty=False)
        return samples
