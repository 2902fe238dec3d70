"""This project: a name server and a broker started here, driven through the Python SDK."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    Producer,
    PushConsumer,
)
from broker.common.message import Message
from broker.remoting.client import SyncRemotingClient
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from tests.harness import EngineProcess, free_port

from .base import BODY_SIZE, Peer, latency_ms, paced, stamped_body

TOPIC = "BenchTopic"
# Its own topic: a new group may start at offset 0 on a young queue (as in RocketMQ), and the
# latency run must only see stamped messages.
LATENCY_TOPIC = "BenchLatency"


class Ours(Peer):
    name = "ours"

    def __init__(self, flush_disk_type: str = "ASYNC_FLUSH", work_dir: str | None = None) -> None:
        self.flush_disk_type = flush_disk_type
        self.work_dir = work_dir

    async def setup(self) -> None:
        base = self.base = Path(tempfile.mkdtemp(prefix="bench-broker-", dir=self.work_dir))
        self.namesrv = EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())])
        conf = base / "broker.conf"
        conf.write_text(
            f"brokerName=bench-broker\nlistenPort={free_port()}\nnamesrvAddr={self.namesrv.addr}\n"
            f"storePathRootDir={base / 'store'}\nflushDiskType={self.flush_disk_type}\n"
        )
        self.broker = EngineProcess(["-m", "broker.server", "-c", str(conf)])
        admin = SyncRemotingClient()
        for topic in (TOPIC, LATENCY_TOPIC):
            create = {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
            assert admin.invoke(
                self.broker.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
            ).ok
        admin.close()
        await asyncio.sleep(0.5)  # registration reaches the name server
        self.producer = Producer("bench-producer", self.namesrv.addr).start()
        self.body = b"x" * BODY_SIZE

    async def teardown(self) -> None:
        self.producer.shutdown()
        self.broker.stop()
        self.namesrv.stop()
        shutil.rmtree(self.base, ignore_errors=True)  # a 1 GiB segment per run adds up

    async def sync_send(self, count: int) -> None:
        def run() -> None:
            for _ in range(count):
                self.producer.send(Message(TOPIC, self.body))

        await asyncio.to_thread(run)

    async def async_send(self, count: int, in_flight: int) -> None:
        def run() -> None:
            slots = threading.Semaphore(in_flight)
            futures = []
            for _ in range(count):
                slots.acquire()
                future = self.producer.send_async(Message(TOPIC, self.body))
                future.add_done_callback(lambda _: slots.release())
                futures.append(future)
            for future in futures:
                future.result()

        await asyncio.to_thread(run)

    async def batch_send(self, count: int, batch: int) -> None:
        def run() -> None:
            for _ in range(count // batch):
                self.producer.send_batch([Message(TOPIC, self.body) for _ in range(batch)])

        await asyncio.to_thread(run)

    async def consume(self, count: int) -> None:
        def run() -> None:
            consumer = LitePullConsumer(
                "bench-lite",
                self.namesrv.addr,
                consume_from_where=CONSUME_FROM_FIRST_OFFSET,
                instance_name="bench-lite",
                auto_commit=False,
            )
            consumer.subscribe(TOPIC)
            consumer.start()
            received = 0
            while received < count:
                received += len(consumer.poll(5))
            consumer.shutdown()

        await asyncio.to_thread(run)

    async def latency(self, rate: int, seconds: float) -> list[float]:
        samples: list[float] = []
        total = int(rate * seconds)
        done = threading.Event()

        def listener(messages, context):
            for msg in messages:
                samples.append(latency_ms(msg.body))
            if len(samples) >= total:
                done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("bench-latency", self.namesrv.addr, instance_name="bench-push")
        consumer.subscribe(LATENCY_TOPIC)
        consumer.register_message_listener(listener)
        await asyncio.to_thread(consumer.start)
        # The producer learns the topic's route before the clock starts, as the peers' clients
        # hold their channels and streams before they publish.
        instance = self.producer.instance
        await asyncio.to_thread(instance.run, instance.route(LATENCY_TOPIC))
        await asyncio.sleep(1)

        async def send() -> None:
            self.producer.send_async(Message(LATENCY_TOPIC, stamped_body()))

        await paced(rate, seconds, send)
        started = time.monotonic()
        while not done.is_set() and time.monotonic() - started < 60:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(consumer.shutdown)
        return samples
