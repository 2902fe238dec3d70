"""What a test's consumer received: listeners for the SDK's push consumers that keep the bodies,
and a bounded wait for what the test expects among them, or count each body's deliveries; and a
round trip through one queue (sent, then pulled back) for tests of how clients connect."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    Producer,
)
from broker.common.message import Message
from broker.common.message_queue import MessageQueue
from broker.local_cluster import wait_until


class ReceivedBodies:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.changed = threading.Condition()

    def add(self, messages) -> None:
        with self.changed:
            self.bodies.extend(m.body for m in messages)
            self.changed.notify_all()

    def listener(self, messages, context):
        """A concurrent listener that takes every message."""
        self.add(messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly(self, messages, context):
        """An orderly listener that takes every message."""
        self.add(messages)
        return ConsumeOrderlyStatus.SUCCESS

    def wait_for(self, predicate: Callable[[list[bytes]], bool], timeout: float = 20.0) -> list[bytes]:
        """The bodies so far, once ``predicate`` holds for them; fails naming them after ``timeout``."""
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.bodies), timeout), self.bodies
            return list(self.bodies)


class DeliveryCounts:
    """A concurrent listener counting each body's deliveries (``seen[body]``): a redelivered
    message counts again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[bytes] = Counter()

    def listener(self, messages, context):
        with self.lock:
            self.seen.update(m.body for m in messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def round_trip(
    namesrv_addr: str, queue: MessageQueue, groups: tuple[str, str], count: int, **options: object
) -> list[bytes]:
    """``count`` messages of this call (tagged) sent to ``queue`` by a producer of ``groups[0]``
    and pulled back by a consumer of ``groups[1]``, both made with ``options`` (``tls``,
    ``credentials``): the bodies received, once ``count`` have come back."""
    tag = uuid.uuid4().hex[:8]
    producer = Producer(groups[0], namesrv_addr, instance_name=f"trip-p-{tag}", **options).start()  # type: ignore[arg-type]
    try:
        bodies = [f"{tag}-{i}".encode() for i in range(count)]
        start = producer.send(Message(queue.topic, bodies[0]), queue=queue).queue_offset
        for body in bodies[1:]:
            assert producer.send(Message(queue.topic, body), queue=queue).send_status == "SEND_OK"
    finally:
        producer.shutdown()
    consumer = LitePullConsumer(
        groups[1], namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name=f"trip-c-{tag}",
        **options,  # type: ignore[arg-type]
    )  # fmt: skip
    consumer.assign([queue])
    consumer.start()
    try:
        consumer.seek(queue, start)
        got: list[bytes] = []

        def received() -> bool:  # this call's messages (a seek may land after a poll from 0)
            got.extend(m.body for m in consumer.poll(0.5) if m.body.startswith(tag.encode()))
            return len(got) >= count

        wait_until(received, 30, what=f"{count} messages sent and pulled back")
        return got
    finally:
        consumer.shutdown()
