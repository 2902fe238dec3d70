"""Issue 19.1: a group whose subscription filters messages out still reaches lag 0.

The consumers commit past the messages their tag or SQL92 filter skips once nothing is in flight
(RocketMQ's correctTagsOffset), so ``mqadmin consumerProgress`` (the broker's consume stats) shows
a caught-up filtered group as caught up, even on queues that hold only messages it never sees.
"""

from __future__ import annotations

import json
import time

import pytest

from broker.cli import main as mqadmin
from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    LitePullConsumer,
    MessageQueue,
    MessageSelector,
    Producer,
    PushConsumer,
)
from broker.common.message import Message
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.received_messages import ReceivedBodies

TOPIC = "FilteredLag"
# Per queue, in send order: W is wanted by every subscription below, o by none. Queue 0 has
# unwanted messages after its last wanted one; queues 2 and 3 hold only unwanted ones.
LAYOUT = ("WoWoo", "oW", "ooo", "oo")
TAG_SELECTOR = MessageSelector.by_tag("Wanted")
SQL_SELECTOR = MessageSelector.by_sql("kind = 'wanted' AND size > 2")
CAUGHT_UP_WITHIN_S = 45  # a pull parked on a caught-up queue answers within 15 s; persists follow


cluster = cluster_fixture(ONE_BROKER, {"enablePropertyFilter": "true"}, topics={TOPIC: len(LAYOUT)})


@pytest.fixture(scope="module")
def wanted(cluster) -> set[bytes]:
    """Sends LAYOUT; the bodies of the wanted messages."""
    producer = Producer("filtered-lag-producer", cluster.namesrv_addr).start()
    bodies = set()
    try:
        for queue_id, kinds in enumerate(LAYOUT):
            for i, kind in enumerate(kinds):
                body = f"q{queue_id}-{i}-{kind}".encode()
                msg = Message(TOPIC, body)
                msg.tags = "Wanted" if kind == "W" else "Other"
                msg.put_user_property("kind", "wanted" if kind == "W" else "other")
                msg.put_user_property("size", "3")
                producer.send(msg, queue=MessageQueue(TOPIC, "broker-a", queue_id))
                if kind == "W":
                    bodies.add(body)
    finally:
        producer.shutdown()
    return bodies


def consumer_progress(capsys, cluster, group: str) -> dict:
    """``mqadmin consumerProgress -g group -t topic --json``, as an operator runs it."""
    capsys.readouterr()
    code = mqadmin(["consumerProgress", "-n", cluster.namesrv_addr, "-g", group, "-t", TOPIC, "--json"])
    out = capsys.readouterr()
    return json.loads(out.out) if code == 0 else {"queues": [], "error": out.err}


def wait_for_zero_lag(capsys, cluster, group: str, tick=lambda: time.sleep(0.2)) -> dict:
    """The group's progress once every queue shows lag 0 (or the last one seen, to assert on)."""
    deadline = time.monotonic() + CAUGHT_UP_WITHIN_S
    while True:
        progress = consumer_progress(capsys, cluster, group)
        queues = progress.get("queues", [])
        if len(queues) == len(LAYOUT) and all(q["diff"] == 0 for q in queues):
            return progress
        if time.monotonic() > deadline:
            return progress
        tick()


def assert_caught_up(progress: dict) -> None:
    assert "error" not in progress, progress["error"]
    rows = {q["queue_id"]: (q["broker_offset"], q["consumer_offset"], q["diff"]) for q in progress["queues"]}
    assert rows == {queue_id: (len(kinds), len(kinds), 0) for queue_id, kinds in enumerate(LAYOUT)}
    assert progress["diff_total"] == 0


def push_consumer(cluster, group: str, selector: MessageSelector, received: ReceivedBodies, orderly=False):
    consumer = PushConsumer(
        group, cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET, persist_interval_ms=200
    )
    consumer.subscribe(TOPIC, selector)
    if orderly:
        consumer.register_message_listener_orderly(received.orderly)
    else:
        consumer.register_message_listener(received.listener)
    return consumer.start()


@pytest.mark.parametrize(
    ("group", "selector", "orderly"),
    [
        ("tag-filtered", TAG_SELECTOR, False),
        ("sql-filtered", SQL_SELECTOR, False),
        ("tag-filtered-orderly", TAG_SELECTOR, True),
    ],
)
def test_caught_up_filtered_push_group_has_no_lag(cluster, wanted, capsys, group, selector, orderly):
    received = ReceivedBodies()
    consumer = push_consumer(cluster, group, selector, received, orderly)
    try:
        assert set(received.wait_for(lambda got: len(got) >= len(wanted))) == wanted
        progress = wait_for_zero_lag(capsys, cluster, group)
    finally:
        consumer.shutdown()
    assert_caught_up(progress)
    assert sorted(received.bodies) == sorted(wanted)  # nothing filtered out was delivered


def test_caught_up_filtered_lite_pull_group_has_no_lag(cluster, wanted, capsys):
    consumer = LitePullConsumer(
        "sql-filtered-lite", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        persist_interval_ms=200,
    )  # fmt: skip
    consumer.subscribe(TOPIC, SQL_SELECTOR)
    consumer.start()
    bodies: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(bodies) < len(wanted) and time.monotonic() < deadline:
            bodies += [m.body for m in consumer.poll(0.5)]
        assert set(bodies) == wanted
        # The application keeps polling (auto-commit) while the lag is watched.
        progress = wait_for_zero_lag(
            capsys,
            cluster,
            "sql-filtered-lite",
            tick=lambda: bodies.extend(m.body for m in consumer.poll(0.2)),
        )
    finally:
        consumer.shutdown()
    assert_caught_up(progress)
    assert sorted(bodies) == sorted(wanted)
