"""A dead letter replayed to the group's retry topic keeps its original topic (RETRY_TOPIC), as
RocketMQ's own retries do: the real SDK's consumers (concurrent and orderly) see the original
topic, and when the copy fails until it is dead again, the broker's new dead letter names the
original topic as its origin — not ``%RETRY%<group>``."""

from __future__ import annotations

import threading

import pytest
from django.urls import reverse

from broker.client import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer
from broker.client.consumer_core import CONSUME_FROM_FIRST_OFFSET
from broker.common import message_const as mc
from broker.common.topic_config import dlq_topic, retry_topic
from broker.local_cluster import wait_until
from console.services import dlq
from tests.cluster import make_dead_letters

pytestmark = pytest.mark.django_db

TOPIC = "OpsReplayOrigin"
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def _replay_to_retry(client, admin, group: str, key: str) -> tuple[str, str]:
    """Replay the dead letter with ``key`` to the retry topic through the console: (its client
    msgId, the copy's new msgId)."""
    client.post(reverse("console:dlq_make_readable", kwargs={"group": group}))
    rows = client.get(reverse("console:dlq_list", kwargs={"group": group}), {"key": key}).context["rows"]
    assert len(rows) == 1, rows
    response = client.post(
        reverse("console:dlq_replay", kwargs={"group": group}),
        {"scope": "one", "ids": rows[0]["offset_msg_id"], "target": "retry"},
    )
    assert response.status_code == 200, response.content
    new_msg_id = response.context["outcome"].new_msg_id
    copy = wait_until(
        lambda: admin.query_message_by_unique_key(retry_topic(group), new_msg_id), what="the replayed copy"
    )[0]
    assert copy.get_property(mc.PROPERTY_RETRY_TOPIC) == TOPIC
    return rows[0]["msg_id"], new_msg_id


def _consumer(namesrv: str, group: str, listener, orderly: bool = False) -> PushConsumer:
    consumer = PushConsumer(
        group,
        namesrv,
        max_reconsume_times=0,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=1000,
    )
    consumer.subscribe(TOPIC, "*")
    if orderly:
        consumer.register_message_listener_orderly(listener)
    else:
        consumer.register_message_listener(listener)
    return consumer


class Seen:
    """What a listener saw of the messages with one key (the others are acknowledged)."""

    def __init__(self, key: str) -> None:
        self.key, self.lock = key, threading.Lock()
        self.topics: list[str] = []

    def record(self, msgs) -> bool:
        mine = [m for m in msgs if self.key in m.keys]
        with self.lock:
            self.topics += [m.topic for m in mine]
        return bool(mine)


def test_replay_to_retry_topic_keeps_the_original_topic_through_a_second_death(
    namesrv, operator_client, admin
):
    group = "ops-replay-origin"
    make_dead_letters(namesrv, TOPIC, group, 2, keys="origin")
    _, new_msg_id = _replay_to_retry(operator_client, admin, group, "origin-1")

    seen = Seen("origin-1")

    def fail_the_replayed_copy(msgs, context):
        failed = seen.record(msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if failed else SUCCESS

    consumer = _consumer(namesrv, group, fail_the_replayed_copy)
    consumer.start()
    try:
        dead = wait_until(
            lambda: admin.query_message_by_unique_key(dlq_topic(group), new_msg_id),
            timeout=30,
            what="the replayed copy to die again",
        )
    finally:
        consumer.shutdown()
    assert seen.topics and set(seen.topics) == {TOPIC}  # the listener never saw %RETRY%<group>
    assert dlq.original_topic(dead[0]) == TOPIC
    rows = operator_client.get(
        reverse("console:dlq_list", kwargs={"group": group}), {"key": "origin-1"}
    ).context["rows"]
    assert {r["origin"] for r in rows} == {TOPIC}


def test_orderly_consumer_sees_the_original_topic_of_a_replayed_copy(namesrv, operator_client, admin):
    group = "ops-replay-origin-orderly"
    make_dead_letters(namesrv, TOPIC, group, 1, keys="orderly")
    _replay_to_retry(operator_client, admin, group, "orderly-0")

    seen = Seen("orderly-0")

    def consume(msgs, context):
        seen.record(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _consumer(namesrv, group, consume, orderly=True)
    consumer.start()
    try:
        wait_until(lambda: seen.topics, timeout=30, what="the orderly consumer to get the replayed copy")
    finally:
        consumer.shutdown()
    assert seen.topics == [TOPIC]
