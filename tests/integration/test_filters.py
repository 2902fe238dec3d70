"""Acceptance 4: SQL92 and tag filters deliver exactly the matching messages; bad SQL is refused."""

import itertools

import orjson
import pytest

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    LitePullConsumer,
    MessageSelector,
    MQClientError,
    Producer,
)
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.common.request_headers import PullMessageRequestHeader
from broker.remoting.command import create_request
from tests.cluster import ONE_BROKER, cluster_fixture

TOPIC = "FilterTopic"
SQL = "a between 0 and 6 AND region IN ('eu','us') AND flag IS NOT NULL"


# One queue: messages come back in send order.
cluster = cluster_fixture(ONE_BROKER, {"enablePropertyFilter": "true"}, topics={TOPIC: 1})


def _messages():
    regions, tags = ("eu", "us", "asia", None), ("TagA", "TagB", "TagC")
    for i, (a, region, with_flag) in enumerate(itertools.product(range(-2, 10), regions, (True, False))):
        msg = Message(TOPIC, f"m{i}".encode())
        msg.tags = tags[i % 3]
        msg.put_user_property("a", str(a))
        if region:
            msg.put_user_property("region", region)
        if with_flag:
            msg.put_user_property("flag", "1")
        yield msg


@pytest.fixture(scope="module")
def sent(cluster):
    producer = Producer("filter-producer", cluster.namesrv_addr).start()
    messages = list(_messages())
    for msg in messages:
        producer.send(msg)
    # The last message matches every subscription below: once it arrives, all earlier ones have.
    sentinel = Message(TOPIC, b"sentinel")
    sentinel.tags = "TagA"
    for name, value in (("a", "1"), ("region", "eu"), ("flag", "1")):
        sentinel.put_user_property(name, value)
    producer.send(sentinel)
    producer.shutdown()
    return messages


def _consume_until_sentinel(cluster, group, selector):
    consumer = LitePullConsumer(group, cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC, selector)
    consumer.start()
    bodies = []
    try:
        for _ in range(200):
            bodies += [m.body for m in consumer.poll(1.0)]
            if b"sentinel" in bodies:
                break
    finally:
        consumer.shutdown()
    assert bodies and bodies[-1] == b"sentinel"
    return bodies[:-1]


def test_sql92_delivers_exactly_the_matching_set(cluster, sent):
    expected = [
        m.body
        for m in sent
        if 0 <= int(m.properties["a"]) <= 6
        and m.properties.get("region") in ("eu", "us")
        and "flag" in m.properties
    ]
    assert len(expected) == 14
    assert _consume_until_sentinel(cluster, "sql-group", MessageSelector.by_sql(SQL)) == expected


def test_sql92_negations_and_missing_properties(cluster, sent):
    selector = MessageSelector.by_sql("NOT (region = 'eu') AND (a NOT BETWEEN 0 AND 8 OR a <> a) OR a = 1")
    expected = [
        m.body
        for m in sent
        if (m.properties.get("region") not in (None, "eu") and not 0 <= int(m.properties["a"]) <= 8)
        or m.properties["a"] == "1"
    ]
    assert _consume_until_sentinel(cluster, "sql-not-group", selector) == expected


def test_tag_expression_delivers_exactly_the_tagged(cluster, sent):
    expected = [m.body for m in sent if m.tags in ("TagA", "TagB")]
    assert _consume_until_sentinel(cluster, "tag-group", "TagA || TagB") == expected


@pytest.mark.parametrize(
    "expression, reason",
    [("a >", "Unexpected"), ("a > 'x'", "cannot be compared"), ("a between 5 and 1", "Illegal values")],
)
def test_invalid_sql_is_refused_when_the_consumer_starts(cluster, expression, reason):
    consumer = LitePullConsumer("bad-sql-group", cluster.namesrv_addr)
    consumer.subscribe(TOPIC, MessageSelector.by_sql(expression))
    with pytest.raises(MQClientError) as caught:
        consumer.start()
    assert caught.value.response_code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert reason in str(caught.value)


def _heartbeat(cluster, expression):
    subscription = {"topic": TOPIC, "subString": expression, "expressionType": "SQL92", "subVersion": 1}
    body = {
        "clientID": "127.0.0.1@raw",
        "consumerDataSet": [{"groupName": "raw-group", "subscriptionDataSet": [subscription]}],
    }
    request = create_request(RequestCode.HEART_BEAT, body=orjson.dumps(body))
    return cluster.admin.invoke(cluster.broker_addr, request)


def test_heartbeat_with_invalid_sql_is_refused_and_not_registered(cluster):
    refused = _heartbeat(cluster, "a = = 1")
    assert refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    ids = create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "raw-group"})
    assert not cluster.admin.invoke(cluster.broker_addr, ids).ok
    assert _heartbeat(cluster, "a = 1").ok


def _pull_sql(cluster, expression):
    header = PullMessageRequestHeader(
        "pull-group", TOPIC, queue_id=0, queue_offset=0, max_msg_nums=8, sys_flag=FLAG_SUBSCRIPTION,
        commit_offset=0, suspend_timeout_millis=0, sub_version=1, subscription=expression,
        expression_type="SQL92",
    )  # fmt: skip
    request = create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    return cluster.admin.invoke(cluster.broker_addr, request)


def test_pull_with_sql92_needs_enable_property_filter(cluster, sent):
    assert _pull_sql(cluster, "a = 3").code == ResponseCode.SUCCESS
    assert _pull_sql(cluster, "a = ").code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    update = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=false\n")
    assert cluster.admin.invoke(cluster.broker_addr, update).ok
    try:
        refused = _pull_sql(cluster, "a = 3")
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in refused.remark
    finally:
        update = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=true\n")
        assert cluster.admin.invoke(cluster.broker_addr, update).ok


def test_sql92_consumer_is_refused_by_a_broker_without_property_filter(cluster):
    update = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=false\n")
    assert cluster.admin.invoke(cluster.broker_addr, update).ok
    try:
        consumer = LitePullConsumer("sql-off-group", cluster.namesrv_addr)
        consumer.subscribe(TOPIC, MessageSelector.by_sql("a = 1"))
        with pytest.raises(MQClientError) as caught:
            consumer.start()
        assert caught.value.response_code == ResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in str(caught.value)
    finally:
        update = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=true\n")
        assert cluster.admin.invoke(cluster.broker_addr, update).ok


def test_subscribing_bad_sql_after_start_is_refused_and_changes_nothing(cluster, sent):
    consumer = LitePullConsumer(
        "late-sql-group", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, MessageSelector.by_sql("a = 1"))
    consumer.start()
    try:
        with pytest.raises(MQClientError, match="cannot be compared"):
            consumer.subscribe(TOPIC, MessageSelector.by_sql("a > 'text'"))
        assert consumer.subscriptions[TOPIC] == "a = 1"
        assert consumer.expression_types[TOPIC] == "SQL92"
    finally:
        consumer.shutdown()
