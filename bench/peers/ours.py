"""This project: a name server and a broker started here, driven through the Python SDK.

Peer "ours" uses the SDK's asyncio API on the benchmark's own loop (as the NATS, RabbitMQ and
Redis peers use their asyncio clients); "ours-threads" drives the blocking API from worker
threads, whose network work runs on the SDK's background loop thread.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TypedDict

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    AsyncLitePullConsumer,
    AsyncProducer,
    AsyncPushConsumer,
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    Producer,
    PushConsumer,
)
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.common.request_headers import CreateTopicRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.local_cluster import free_port, start_broker, start_namesrv, write_conf
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .base import BODY_SIZE, LatencySamples, Peer, paced

TOPIC = "BenchTopic"
# Its own topic: a new group may start at offset 0 on a young queue (as in RocketMQ), and the
# latency run must only see stamped messages.
LATENCY_TOPIC = "BenchLatency"


class _LiteConsumerOptions(TypedDict):
    consume_from_where: str
    instance_name: str
    auto_commit: bool


# The consume run reads the whole topic from the start without committing, in both APIs.
LITE_CONSUMER_OPTIONS: _LiteConsumerOptions = {
    "consume_from_where": CONSUME_FROM_FIRST_OFFSET,
    "instance_name": "bench-lite",
    "auto_commit": False,
}


def _settle_into(release, failures: list[BaseException]):
    """A done-callback for a send's future: frees its slot and keeps its error, if any. The
    futures themselves are not kept: thousands of finished futures and results held to the end
    would only grow the process's garbage collections (the peers keep nothing either)."""

    def settled(future) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            failures.append(error)
        release()

    return settled


class _OursCluster(Peer):
    """A name server and a broker started here, with the benchmark's topics; each API's peer
    brings its own producer (``start_producer``, ``stop_producer``)."""

    def __init__(
        self,
        flush_disk_type: str = "ASYNC_FLUSH",
        work_dir: str | None = None,
        broker_conf: dict[str, str] | None = None,
    ) -> None:
        self.flush_disk_type = flush_disk_type
        self.work_dir = work_dir
        self.broker_conf = broker_conf or {}  # extra broker.conf lines (e.g. busyPollWindowMicros=0)

    async def setup(self) -> None:
        base = self.base = Path(tempfile.mkdtemp(prefix="bench-broker-", dir=self.work_dir))
        # Not drained, as always here: no reader thread competes with the benchmark for the GIL.
        self.namesrv = start_namesrv(drain=False)
        settings = {"brokerName": "bench-broker", "storePathRootDir": base / "store"}
        conf = write_conf(
            base / "broker.conf", {**settings, "flushDiskType": self.flush_disk_type, **self.broker_conf}
        )
        self.broker = start_broker(conf, self.namesrv.addr, free_port(), drain=False)
        admin = SyncRemotingClient()
        for topic in (TOPIC, LATENCY_TOPIC):
            create = CreateTopicRequestHeader(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 4, 6, "SINGLE_TAG")
            assert admin.invoke(
                self.broker.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
            ).ok
        admin.close()
        await asyncio.sleep(0.5)  # registration reaches the name server
        self.body = b"x" * BODY_SIZE
        await self.start_producer()

    async def start_producer(self) -> None:
        raise NotImplementedError

    async def stop_producer(self) -> None:
        raise NotImplementedError

    async def teardown(self) -> None:
        await self.stop_producer()
        self.broker.stop()
        self.namesrv.stop()
        shutil.rmtree(self.base, ignore_errors=True)  # a 1 GiB segment per run adds up


class OursThreads(_OursCluster):
    """The blocking API (``Producer``, ``LitePullConsumer``, ``PushConsumer``) from threads."""

    name = "ours-threads"
    producer: Producer

    async def start_producer(self) -> None:
        self.producer = Producer("bench-producer", self.namesrv.addr).start()

    async def stop_producer(self) -> None:
        self.producer.shutdown()

    async def sync_send(self, count: int) -> None:
        def run() -> None:
            for _ in range(count):
                self.producer.send(Message(TOPIC, self.body))

        await asyncio.to_thread(run)

    async def async_send(self, count: int, in_flight: int) -> None:
        def run() -> None:
            slots, failures = threading.Semaphore(in_flight), list[BaseException]()
            settled = _settle_into(slots.release, failures)
            for _ in range(count):
                slots.acquire()
                self.producer.send_async(Message(TOPIC, self.body)).add_done_callback(settled)
            for _ in range(in_flight):  # every send answered
                slots.acquire()
            if failures:
                raise failures[0]

        await asyncio.to_thread(run)

    async def batch_send(self, count: int, batch: int) -> None:
        def run() -> None:
            for _ in range(count // batch):
                self.producer.send_batch([Message(TOPIC, self.body) for _ in range(batch)])

        await asyncio.to_thread(run)

    async def consume(self, count: int) -> None:
        def run() -> None:
            consumer = LitePullConsumer("bench-lite", self.namesrv.addr, **LITE_CONSUMER_OPTIONS)
            consumer.subscribe(TOPIC)
            consumer.start()
            received = 0
            while received < count:
                received += len(consumer.poll(5))
            consumer.shutdown()

        await asyncio.to_thread(run)

    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        samples = LatencySamples(int(rate * seconds), threading.Event())

        def listener(messages, context):
            for msg in messages:
                samples.add(msg.body)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("bench-latency", self.namesrv.addr, instance_name="bench-push")
        consumer.subscribe(LATENCY_TOPIC)
        consumer.register_message_listener(listener)
        await asyncio.to_thread(consumer.start)
        # The producer learns the topic's route before the clock starts, as the peers' clients
        # hold their channels and streams before they publish.
        instance = self.producer.instance
        assert instance is not None  # a started producer's
        await asyncio.to_thread(instance.run, instance.route(LATENCY_TOPIC))
        await asyncio.sleep(1)

        async def send(body: bytes) -> None:
            self.producer.send_async(Message(LATENCY_TOPIC, body))

        await paced(rate, seconds, send)
        started = time.monotonic()
        while not samples.done.is_set() and time.monotonic() - started < 60:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(consumer.shutdown)
        return samples


class Ours(_OursCluster):
    """The asyncio API on the benchmark's loop: no thread, no hand-off per message."""

    name = "ours"
    producer: AsyncProducer

    async def start_producer(self) -> None:
        self.producer = await AsyncProducer("bench-producer", self.namesrv.addr).start()

    async def stop_producer(self) -> None:
        await self.producer.shutdown()

    async def sync_send(self, count: int) -> None:
        for _ in range(count):
            await self.producer.send(Message(TOPIC, self.body))

    async def async_send(self, count: int, in_flight: int) -> None:
        slots, failures = asyncio.Semaphore(in_flight), list[BaseException]()
        settled = _settle_into(slots.release, failures)
        for _ in range(count):
            await slots.acquire()
            self.producer.send_async(Message(TOPIC, self.body)).add_done_callback(settled)
        for _ in range(in_flight):  # every send answered
            await slots.acquire()
        if failures:
            raise failures[0]

    async def batch_send(self, count: int, batch: int) -> None:
        for _ in range(count // batch):
            await self.producer.send_batch([Message(TOPIC, self.body) for _ in range(batch)])

    async def consume(self, count: int) -> None:
        consumer = AsyncLitePullConsumer("bench-lite", self.namesrv.addr, **LITE_CONSUMER_OPTIONS)
        consumer.subscribe(TOPIC)
        await consumer.start()
        received = 0
        while received < count:
            received += len(await consumer.poll(5))
        await consumer.shutdown()

    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        samples = LatencySamples(int(rate * seconds), asyncio.Event())

        async def listener(messages, context):
            for msg in messages:
                samples.add(msg.body)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = AsyncPushConsumer("bench-latency", self.namesrv.addr, instance_name="bench-push")
        consumer.subscribe(LATENCY_TOPIC)
        consumer.register_message_listener(listener)
        await consumer.start()
        # The producer learns the topic's route before the clock starts, as the peers' clients
        # hold their channels and streams before they publish.
        instance = self.producer.producer.instance
        assert instance is not None  # a started producer's
        await instance.route(LATENCY_TOPIC)
        await asyncio.sleep(1)

        async def send(body: bytes) -> None:
            # Each send awaited, as the other peers' publishes: nothing piles up in this process
            # (a list of every future and result made the process's full collections grow to
            # tens of ms, charged to whichever message was in flight).
            await self.producer.send(Message(LATENCY_TOPIC, body))

        await paced(rate, seconds, send)
        try:
            await asyncio.wait_for(samples.done.wait(), 60)
        except TimeoutError:
            pass
        await consumer.shutdown()
        return samples
