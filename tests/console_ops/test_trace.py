"""Message trace timeline from the records real traced clients write to RMQ_SYS_TRACE_TOPIC, plus
the stored message, its dead-letter copy and the console's replays."""

from __future__ import annotations

import pytest
from django.urls import reverse

from broker.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from broker.client.consumer_core import CONSUME_FROM_FIRST_OFFSET
from broker.common.message import Message
from broker.local_cluster import wait_until

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "OpsTraced", "ops-traced-group"


@pytest.fixture(scope="module")
def traced_failure(cluster):
    """A message sent with trace on, consumed with trace on by a group that fails it for good."""
    producer = Producer("ops-traced-producer", cluster, enable_trace=True).start()
    try:
        msg = Message(TOPIC, b'{"order": 7}')
        msg.keys, msg.tags = "traced-7", "t"
        msg_id = producer.send(msg).msg_id
    finally:
        producer.shutdown()
    consumer = PushConsumer(GROUP, cluster, enable_trace=True, max_reconsume_times=0,
                            consume_from_where=CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    consumer.start()
    return msg_id, consumer


def _kinds(response) -> list[str]:
    return [item["event"].kind for item in response.context["events"]]


def test_timeline_of_a_traced_message_that_died(namesrv, traced_failure, viewer_client):
    msg_id, consumer = traced_failure
    url = reverse("console:trace")

    def page():
        response = viewer_client.get(url, {"msgId": msg_id, "topic": TOPIC})
        kinds = _kinds(response)
        return response if {"sent", "consume-start", "consume-failed", "dlq"} <= set(kinds) else None

    try:
        response = wait_until(page, timeout=30, what="send, consume and dead-letter events in the trace")
    finally:
        consumer.shutdown()
    kinds = _kinds(response)
    assert kinds.index("sent") < kinds.index("consume-start") < kinds.index("consume-failed")
    assert "stored" in kinds
    assert response.context["message"]["keys"] == "traced-7"
    assert f"Consume failed in {GROUP}".encode() in response.content
    assert b"Dead-lettered" in response.content


def test_unknown_message_is_not_found(namesrv, viewer_client):
    """Nothing at all known of the id: 404 "not found", the form kept to correct it."""
    response = viewer_client.get(reverse("console:trace"), {"msgId": "00000000000000000000000000000000"})
    assert response.status_code == 404 and response.context["message"] is None
    assert b"Not found: nothing is recorded about 00000000000000000000000000000000" in response.content
    assert b"<title>Message 00000000000000000000000000000000 not found" in response.content
    assert b'name="msgId"' in response.content


def test_bad_topic_is_refused(namesrv, viewer_client):
    response = viewer_client.get(reverse("console:trace"), {"msgId": "AB", "topic": "no spaces"})
    assert response.status_code == 400
