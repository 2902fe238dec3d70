"""Message trace timeline: RocketMQ trace contexts (as RocketMQ clients write them to
RMQ_SYS_TRACE_TOPIC), the stored message, its dead-letter copy and console replays."""

from __future__ import annotations

import pytest
from django.urls import reverse

from broker.client import Producer
from broker.common.message import Message
from console.views_ops.services.trace import decode_trace_body
from tests.console_ops.cluster import make_dead_letters, send, wait_until

pytestmark = pytest.mark.django_db

S, F = "\x01", "\x02"


def _pub(ts, group, topic, msg_id, keys):
    return (
        S.join(
            [
                "Pub",
                str(ts),
                "DefaultRegion",
                group,
                topic,
                msg_id,
                "t",
                keys,
                "127.0.0.1:1",
                "20",
                "3",
                "Normal_Msg",
                "0A",
                "true",
            ]
        )
        + F
    )


def _sub(ts, group, request_id, msg_id, retry, cost, ok):
    before = S.join(["SubBefore", str(ts), "DefaultRegion", group, request_id, msg_id, str(retry), "k"]) + F
    after = (
        S.join(
            [
                "SubAfter",
                request_id,
                msg_id,
                str(cost),
                "true" if ok else "false",
                "k",
                "0",
                str(ts + cost),
                group,
            ]
        )
        + F
    )
    return before + after


def _write_trace(namesrv, msg_id, body):
    producer = Producer("OPS_TRACE_WRITER", namesrv).start()
    try:
        msg = Message("RMQ_SYS_TRACE_TOPIC", body.encode())
        msg.keys = [msg_id]
        producer.send(msg)
    finally:
        producer.shutdown()


def test_decode_trace_body_reads_rocketmq_contexts():
    body = (
        _pub(1000, "pg", "T", "M1", "k1") + _sub(2000, "cg", "r1", "M1", 0, 7, False) + "Weird" + S + "x" + F
    )
    contexts = decode_trace_body(body)
    assert [c["kind"] for c in contexts] == ["Pub", "SubBefore", "SubAfter", "Weird"]
    assert contexts[0]["group"] == "pg" and contexts[0]["costTime"] == 3 and contexts[0]["success"]
    assert (
        contexts[2]["success"] is False and contexts[2]["timestamp"] == 2007 and contexts[2]["group"] == "cg"
    )
    assert decode_trace_body("") == []


def test_timeline_of_a_consumed_message(namesrv, viewer_client):
    sent = send(namesrv, "OpsTraced", 1, keys="traced")[0]
    msg_id = sent.msg_id
    body = (
        _pub(1_000, "app-producer", "OpsTraced", msg_id, "traced-0")
        + _sub(2_000, "app-consumer", "req1", msg_id, 0, 5, False)
        + _sub(3_000, "app-consumer", "req2", msg_id, 1, 4, True)
    )
    _write_trace(namesrv, msg_id, body)
    url = reverse("console_ops:trace")

    def page():
        response = viewer_client.get(url, {"msgId": msg_id, "topic": "OpsTraced"})
        return response if len(response.context["events"]) >= 6 else None

    response = wait_until(page, what="the trace records to be indexed")
    kinds = [item["event"].kind for item in response.context["events"]]
    assert kinds == ["sent", "consume-start", "consume-failed", "retry", "consumed", "stored"]
    assert response.context["message"]["topic"] == "OpsTraced"
    assert b"Consume failed in app-consumer" in response.content


def test_timeline_shows_dead_letter_and_unknown_ids(namesrv, viewer_client):
    make_dead_letters(namesrv, "OpsTracedDead", "ops-trace-group", 1, keys="tdead")
    from console import cluster_access

    admin = cluster_access.admin_for(namesrv)
    original = admin.query_message_by_key("OpsTracedDead", "tdead-0")[0]
    _write_trace(
        namesrv,
        original.client_msg_id,
        _sub(5_000, "ops-trace-group", "r9", original.client_msg_id, 0, 2, False),
    )
    url = reverse("console_ops:trace")

    def page():
        response = viewer_client.get(url, {"msgId": original.client_msg_id, "topic": "OpsTracedDead"})
        return response if "dlq" in [i["event"].kind for i in response.context["events"]] else None

    response = wait_until(page, what="the dead-letter event")
    assert b"Dead-lettered for ops-trace-group" in response.content
    unknown = viewer_client.get(url, {"msgId": "00000000000000000000000000000000"})
    assert unknown.status_code == 200 and unknown.context["message"] is None
    assert b"Nothing is recorded" in unknown.content
