"""Issue 19.1: a group whose subscription filters messages out still reaches lag 0.

The consumers commit past the messages their tag or SQL92 filter skips once nothing is in flight
(RocketMQ's correctTagsOffset), so ``mqadmin consumerProgress`` (the broker's consume stats) shows
a caught-up filtered group as caught up, even on queues that hold only messages it never sees.
"""

from __future__ import annotations

import asyncio
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
CAUGHT_UP_WITHIN_S = 45  # a held pull past skipped messages answers within 5 s (re-checked); persists follow


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
        consumed_at = time.monotonic()
        progress = wait_for_zero_lag(capsys, cluster, group)
        caught_up_after = time.monotonic() - consumed_at
    finally:
        consumer.shutdown()
    assert_caught_up(progress)
    if not orderly:
        # The last message consumed commits past the skipped ones after it: no wait for the end
        # of the next pull's hold (RocketMQ's client waits for it, showing lag for up to 15 s).
        assert caught_up_after < CLIENT_HOLD_S - 1, f"lag 0 only after {caught_up_after:.1f} s"
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


# -- issue 32 item 11: a held pull whose new messages all fail the filter ------------------------
HELD_TOPIC = "FilteredWhileHeld"
CLIENT_HOLD_S = 15  # the SDK's (and Apache's client's) suspendTimeoutMillis
RAW_HOLD_MS = 60_000  # the raw pull below asks for longer: only a re-check can answer it early


def _group_lag(capsys, cluster, group: str, topic: str) -> dict:
    capsys.readouterr()
    code = mqadmin(["consumerProgress", "-n", cluster.namesrv_addr, "-g", group, "-t", topic, "--json"])
    out = capsys.readouterr()
    return json.loads(out.out) if code == 0 else {"queues": [], "error": out.err}


async def _parked_raw_pull(addr: str, offset: int):
    """A tag-filtered pull held at ``offset`` (the queue's end), and the client it waits on. It
    is parked once a request sent after it on the same connection is answered (the broker serves
    a connection's requests in order, and parks a pull in its handler)."""
    from broker.common.codes import RequestCode
    from broker.common.pull_sysflag import FLAG_SUBSCRIPTION, FLAG_SUSPEND
    from broker.common.request_headers import PullMessageRequestHeader
    from broker.remoting.client import RemotingClient
    from broker.remoting.command import create_request

    client = RemotingClient()
    max_offset = create_request(RequestCode.GET_MAX_OFFSET, {"topic": HELD_TOPIC, "queueId": 0})
    assert (await client.invoke(addr, max_offset)).int_field("offset") == offset
    header = PullMessageRequestHeader(
        consumer_group="held-filtered-raw", topic=HELD_TOPIC, queue_id=0, queue_offset=offset,
        max_msg_nums=32, sys_flag=FLAG_SUSPEND | FLAG_SUBSCRIPTION, commit_offset=-1,
        suspend_timeout_millis=RAW_HOLD_MS, sub_version=0, subscription="Wanted", expression_type="TAG",
    )  # fmt: skip
    pull = asyncio.create_task(client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, header), 90_000))
    await asyncio.sleep(0)  # the pull is written first
    max_offset = create_request(RequestCode.GET_MAX_OFFSET, {"topic": HELD_TOPIC, "queueId": 0})
    assert (await client.invoke(addr, max_offset)).ok
    assert not pull.done()  # nothing to read yet: held
    return client, pull


async def test_held_pull_whose_new_messages_all_fail_the_filter_moves_on(cluster, capsys):
    """As Apache's PullRequestHoldService: held pulls are re-checked every 5 s; one whose queue
    grew by messages its filter skips is answered with the offset moved past them, so a
    caught-up filtered group shows lag 0 long before its 15-s pull hold ends (it showed 20)."""
    from broker.common.codes import ResponseCode

    cluster.create_topic(HELD_TOPIC, 1)
    queue = MessageQueue(HELD_TOPIC, "broker-a", 0)
    producer = Producer("held-filtered-producer", cluster.namesrv_addr).start()
    received = ReceivedBodies()
    consumer = PushConsumer(
        "held-filtered", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        persist_interval_ms=200,
    )  # fmt: skip
    consumer.subscribe(HELD_TOPIC, TAG_SELECTOR)
    consumer.register_message_listener(received.listener)
    consumer.start()
    client = None
    try:
        first = Message(HELD_TOPIC, b"wanted-0")
        first.tags = "Wanted"
        await asyncio.to_thread(producer.send, first, queue=queue)
        # Delivered: the consumer's next pull (offset 1) is held from about now.
        await asyncio.to_thread(received.wait_for, lambda got: got == [b"wanted-0"])
        client, pull = await _parked_raw_pull(cluster.broker_addr, 1)
        sent_at = time.monotonic()
        for i in range(20):
            other = Message(HELD_TOPIC, f"other-{i}".encode())
            other.tags = "Other"
            await asyncio.to_thread(producer.send, other, queue=queue)
        # Answered by the re-check, not by the end of its 60-s hold: the offset moved past all 20.
        answer = await asyncio.wait_for(pull, CLIENT_HOLD_S)
        assert (answer.code, answer.field("nextBeginOffset")) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "21")
        # The SDK consumer's own held pull (15 s, from before the sends) was answered the same
        # way: it committed past them, and the group is caught up before that hold would end.
        while True:
            progress = _group_lag(capsys, cluster, "held-filtered", HELD_TOPIC)
            rows = [(q["broker_offset"], q["consumer_offset"], q["diff"]) for q in progress["queues"]]
            if rows == [(21, 21, 0)] or time.monotonic() - sent_at > CLIENT_HOLD_S - 1:
                break
            await asyncio.sleep(0.2)
        assert rows == [(21, 21, 0)], progress
        assert received.bodies == [b"wanted-0"]  # nothing filtered out was delivered
    finally:
        consumer.shutdown()
        producer.shutdown()
        if client is not None:
            await client.close()
