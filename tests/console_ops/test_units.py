"""The operations pages' pure parts: tail filters, replay plans and copies, the rate limiter,
delay-level parsing."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import BadRequest

from broker.common import message_const as mc
from broker.common.message import MessageExt
from console.services import dlq
from console.services.delayed import parse_levels
from console.tail.filters import TailFilterError, compile_filter
from console.views.common import export_messages


def _event(tags="a", keys=("k1",), msg_id="ID1", **props):
    return {"tags": tags, "keys": list(keys), "msgId": msg_id, "properties": {"TAGS": tags, **props}}


def test_tail_filter_by_tags_key_and_sql():
    assert compile_filter().matches(_event())
    assert compile_filter(tags="*").matches(_event())
    both = compile_filter(tags="a || b")
    assert both.matches(_event("b")) and not both.matches(_event("c"))
    assert compile_filter(key="k").matches(_event()) and not compile_filter(key="zz").matches(_event())
    assert compile_filter(key="ID").matches(_event())  # the msgId counts as a key
    sql = compile_filter(sql="amount > 10 AND region = 'eu'")
    assert sql.matches(_event(amount="11", region="eu"))
    assert not sql.matches(_event(amount="9", region="eu"))
    assert not sql.matches(_event(region="eu"))  # a missing property is not a match
    assert compile_filter(sql="TAGS = 'a'").matches(_event())


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"sql": "amount >"}, "amount"), ({"tags": "||"}, "names no tag"), ({"key": "x" * 2001}, "longer than")],
)
def test_bad_tail_filters_say_why(kwargs, reason):
    with pytest.raises(TailFilterError, match=reason):
        compile_filter(**kwargs)


def _dead(origin: str | None = "Orders") -> MessageExt:
    props = {
        mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1",
        "TAGS": "t",
        "KEYS": "k",
        "color": "red",
        mc.PROPERTY_DELAY_TIME_LEVEL: "3",
        mc.PROPERTY_MAX_RECONSUME_TIMES: "0",
    }
    if origin:
        props[mc.PROPERTY_RETRY_TOPIC] = origin
    return MessageExt("%DLQ%g", b"body", 0, props, msg_id="OFFSET1", reconsume_times=1)


def test_replay_plan_and_copy():
    original, retry = dlq.plan_replay("g", [_dead(), _dead(None)], "original")
    assert (original.destination, original.error) == ("Orders", "")
    assert retry.destination is None and "RETRY_TOPIC" in retry.error
    assert {s.destination for s in dlq.plan_replay("g", [_dead(), _dead(None)], "retry")} == {"%RETRY%g"}
    with pytest.raises(ValueError, match="unknown replay target"):
        dlq.plan_replay("g", [], "sideways")
    copy = dlq.replay_copy(_dead(), "Orders")
    assert copy.topic == "Orders" and copy.body == b"body"
    assert copy.properties == {"TAGS": "t", "KEYS": "k", "color": "red", mc.PROPERTY_ORIGIN_MESSAGE_ID: "U1"}


def test_rate_limiter_spaces_calls():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(round(seconds, 6))
        now[0] += seconds

    limiter = dlq.RateLimiter(4, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limiter.wait()
    assert slept == [0.25, 0.25, 0.25, 0.25]
    unlimited = dlq.RateLimiter(0, clock=lambda: now[0], sleep=sleep)
    unlimited.wait()
    assert len(slept) == 4


def test_delay_levels_parse_as_rocketmq_writes_them():
    assert parse_levels("1s 5s 1m 2h 1d") == [
        ("1s", 1000),
        ("5s", 5000),
        ("1m", 60_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
    ]
    with pytest.raises(ValueError, match="bad messageDelayLevel entry"):
        parse_levels("1s 5x")


def test_exports_keep_a_binary_body_whole_and_refuse_unknown_formats():
    binary = MessageExt(topic="%DLQ%g", body=bytes(range(256)), queue_id=0)
    binary.tags = "t"
    rows = [(binary, "broker-a", {"origin_topic": "Orders"})]
    response = export_messages(rows, "json", "dlq-g", ("origin_topic",))
    (row,) = json.loads(response.content)
    assert (row["body_encoding"], row["body"]) == ("hex", bytes(range(256)).hex())  # not "\ufffd"s
    assert (row["origin_topic"], row["broker_name"]) == ("Orders", "broker-a")
    assert response["Content-Disposition"] == 'attachment; filename="dlq-g.json"'
    with pytest.raises(BadRequest, match="csv or json"):
        export_messages([], "xml", "dlq-g", ())
