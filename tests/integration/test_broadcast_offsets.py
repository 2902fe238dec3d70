"""Issue 19.2: a broadcasting consumer's offsets survive a clean shutdown.

Each broadcasting member keeps its progress in ``<dir>/<client id>/<group>/offsets.json`` (with a
``.bak``), written every few seconds and at shutdown; a member restarted with the same client id
and directory goes on exactly where it stopped: it neither consumes again what it had consumed
nor skips what arrived while it was down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.client import (
    BROADCASTING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    MessageQueue,
    Producer,
    PushConsumer,
)
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.received_messages import ReceivedBodies

QUEUES = 2


cluster = cluster_fixture(ONE_BROKER)


@pytest.fixture
def producer(cluster):
    producer = Producer("broadcast-offsets-producer", cluster.namesrv_addr).start()
    yield producer
    producer.shutdown()


def send(producer, topic: str, prefix: str, count: int) -> list[bytes]:
    """``count`` messages spread over the topic's queues; their bodies."""
    bodies = []
    for i in range(count):
        body = f"{prefix}-{i}".encode()
        producer.send(Message(topic, body), queue=MessageQueue(topic, "broker-a", i % QUEUES))
        bodies.append(body)
    return bodies


def broadcasting_consumer(cluster, group, topic, offsets_dir, received, consume_from_where, **options):
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        message_model=BROADCASTING,
        consume_from_where=consume_from_where,
        offset_store_dir=str(offsets_dir),
        consume_threads=1,  # one queue's messages reach the listener in queue order
        **options,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(received.listener)
    return consumer.start()  # the queues' start offsets are fixed once it returns


@pytest.mark.parametrize("consume_from_where", [CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET])
def test_restarted_broadcasting_consumer_goes_on_where_it_stopped(
    cluster, producer, tmp_path, consume_from_where
):
    topic = group = f"BroadcastRestart{consume_from_where.rsplit('_', 2)[-2].title()}"
    cluster.create_topic(topic, QUEUES)
    first = ReceivedBodies()
    consumer = broadcasting_consumer(cluster, group, topic, tmp_path, first, consume_from_where)
    try:
        before = send(producer, topic, "before", 6)
        assert sorted(first.wait_for(lambda got: len(got) >= len(before))) == sorted(before)
    finally:
        consumer.shutdown()
    meanwhile = send(producer, topic, "meanwhile", 5)

    again = ReceivedBodies()
    consumer = broadcasting_consumer(cluster, group, topic, tmp_path, again, consume_from_where)
    try:
        # One last message per queue: once each has arrived, so has everything before it.
        last = [f"last-{q}".encode() for q in range(QUEUES)]
        for queue_id, body in enumerate(last):
            producer.send(Message(topic, body), queue=MessageQueue(topic, "broker-a", queue_id))
        got = again.wait_for(lambda bodies: set(last) <= set(bodies))
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(meanwhile + last)  # nothing again, nothing skipped


def offset_table(path: Path) -> dict[str, int] | None:
    try:
        return json.loads(path.read_bytes())["offsetTable"]
    except (OSError, ValueError, KeyError):
        return None


def test_broadcasting_offsets_file_is_written_periodically_with_a_backup(cluster, producer, tmp_path):
    topic = group = "BroadcastPeriodic"
    cluster.create_topic(topic, QUEUES)
    received = ReceivedBodies()
    consumer = broadcasting_consumer(
        cluster, group, topic, tmp_path, received, CONSUME_FROM_FIRST_OFFSET, persist_interval_ms=300
    )
    path = tmp_path / consumer.instance.client_id.replace(":", "_") / group / "offsets.json"
    backup = path.with_name("offsets.json.bak")
    keys = [f"{topic}@broker-a@{q}" for q in range(QUEUES)]
    try:
        sent = send(producer, topic, "first", 4)
        received.wait_for(lambda got: len(got) >= len(sent))
        # Written while the consumer runs, not only when it stops.
        expected = dict.fromkeys(keys, 2)
        assert wait_until(lambda: offset_table(path) == expected, timeout=20), offset_table(path)
        sent += send(producer, topic, "second", 2)
        received.wait_for(lambda got: len(got) >= len(sent))
        expected = dict.fromkeys(keys, 3)
        assert wait_until(lambda: offset_table(path) == expected, timeout=20), offset_table(path)
        # The previous content is kept beside it, for a write torn by a crash.
        previous = offset_table(backup)
        assert previous is not None and set(previous) == set(keys), previous
        assert all(2 <= previous[key] <= 3 for key in keys), previous
    finally:
        consumer.shutdown()
    assert offset_table(path) == expected  # the clean shutdown keeps what was consumed
