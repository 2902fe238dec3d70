"""A push consumer's clean shutdown commits what its listener finished.

Seen in a loaded CI-like run: a group's consumer was shut down while a batch was still in its
listener; the queues were dropped (their offsets committed) before the batch ended, so the finished
batch's offset was never committed and the group's next consumer consumed it again (a dead letter
stored twice). RocketMQ lets consumption in flight end before the offsets are persisted; batches not
started yet stay uncommitted and go to the next owner.
"""

from __future__ import annotations

import threading
import time

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    MessageQueue,
    Producer,
    PushConsumer,
)
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import ONE_BROKER, cluster_fixture

TOPIC, GROUP = "ShutdownCommitTopic", "shutdown-commit-group"
COUNT = 5

cluster = cluster_fixture(ONE_BROKER, topics={TOPIC: 1})


def test_a_batch_in_the_listener_at_shutdown_is_committed_and_not_consumed_again(cluster):
    producer = Producer("shutdown-commit-producer", cluster.namesrv_addr).start()
    try:
        for index in range(COUNT):
            producer.send(Message(TOPIC, f"m{index}".encode()), queue=MessageQueue(TOPIC, "broker-a", 0))
    finally:
        producer.shutdown()

    in_listener, release = threading.Event(), threading.Event()
    first_seen: list[bytes] = []

    def slow_first(messages, context):
        first_seen.extend(m.body for m in messages)
        in_listener.set()
        release.wait(30)  # held until the shutdown has begun
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    first = consumer(cluster.namesrv_addr, slow_first)
    assert in_listener.wait(30), "the first message never reached the listener"
    stopping = threading.Thread(target=first.shutdown)
    stopping.start()
    time.sleep(0.5)  # the shutdown is under way (the queue would be dropped by now) ...
    release.set()  # ... when the batch in the listener ends
    stopping.join(60)
    assert not stopping.is_alive()
    assert first_seen == [b"m0"]

    again: list[bytes] = []

    def collect(messages, context):
        again.extend(m.body for m in messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    second = consumer(cluster.namesrv_addr, collect)
    try:
        wait_until(lambda: len(again) >= COUNT - 1, timeout=30, what="the rest of the messages")
        time.sleep(0.5)  # a duplicate would arrive with the rest
    finally:
        second.shutdown()
    assert sorted(again) == [f"m{index}".encode() for index in range(1, COUNT)]


def consumer(namesrv: str, listener) -> PushConsumer:
    member = PushConsumer(
        GROUP,
        namesrv,
        consume_threads=1,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=1000,
    )
    member.subscribe(TOPIC, "*")
    member.register_message_listener(listener)
    member.start()
    return member
