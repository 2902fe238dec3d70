"""The requests that used to hold the broker's event loop for seconds (issue 21: a 10 MB SQL92
expression 7.7 s, a batch of 170k one-byte messages 1.15 s, a topic with 2M queues plus a stats
request 7 s), each sent to a real broker at its new limit and past it: answered or refused with
RocketMQ's code and a reason, while the broker's own loop-lag monitor (``eventLoopLagPeakMillis``
in its runtime info: the latest tick of the last minute) stays under a generous bound."""

from __future__ import annotations

import os
import time

import pytest

from broker.common import fastjson
from broker.common.batch_codec import MAX_BATCH_MESSAGES, encode_batch
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.filter import (
    MAX_SQL_LENGTH,
    MAX_SQL_TOKENS,
    MAX_TAG_EXPRESSION_LENGTH,
    FilterSyntaxError,
    compile_sql92,
)
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.server.processors.clients import MAX_HEARTBEAT_GROUPS
from tests.server.refusals_broker import RefusalBroker, assert_refused

TOPIC, GROUP = "BoundsTopic", "bounds-group"
# Generous: on a quiet machine the peak after all these requests is ~20 ms, but a loaded one runs
# the same work several times slower and a starved process's timer fires late by itself (169 ms
# seen with seven test runs sharing two cores; over 400 ms once with the parallel suite beside
# JVMs); before the bounds these requests held the loop 1,150-7,700 ms on a quiet machine, so the
# bound stays under every one of them. LOOP_LAG_BOUND_MS tightens it.
BOUND_MS = int(os.environ.get("LOOP_LAG_BOUND_MS", "1000"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("bounds"), {"enablePropertyFilter": "true"})
    broker.create_topic(TOPIC, 1)
    broker.create_group(GROUP)
    yield broker
    broker.stop()


def timed(label: str, call):
    started = time.perf_counter()
    response = call()
    print(f"{label}: {ResponseCode(response.code).name} in {(time.perf_counter() - started) * 1000:.1f} ms")
    return response


def send_batch(broker, body: bytes):
    return broker.send(TOPIC, body, code=RC.SEND_BATCH_MESSAGE)


def pull_with(broker, expression: str, expression_type: str = "SQL92"):
    fields = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 1,
        "sysFlag": FLAG_SUBSCRIPTION,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subVersion": 1,
        "subscription": expression,
        "expressionType": expression_type,
    }
    return broker.invoke(RC.PULL_MESSAGE, fields)


def heartbeat_with(broker, expressions: list[str]):
    subscriptions = [
        {"topic": TOPIC, "subString": e, "expressionType": "SQL92", "subVersion": 1} for e in expressions
    ]
    consumer = {
        "groupName": GROUP,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": subscriptions,
    }
    body = fastjson.dumps({"clientID": "bounds-client", "consumerDataSet": [consumer], "producerDataSet": []})
    return broker.invoke(RC.HEART_BEAT, {}, body)


def heartbeat_of_groups(broker, count: int):
    subscription = {"topic": TOPIC, "subString": "*", "expressionType": "TAG"}
    consumers = [
        {
            "groupName": f"many-{count}-{i}",
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [subscription],
        }
        for i in range(count)
    ]
    body = fastjson.dumps({"clientID": f"many-{count}", "consumerDataSet": consumers, "producerDataSet": []})
    return broker.invoke(RC.HEART_BEAT, {}, body)


def densest_sql(salt: int) -> str:
    """A valid expression with as many tokens as allowed, balanced so it stays shallow."""
    for count in range(MAX_SQL_TOKENS // 6, 0, -1):
        terms = [f"a{salt}={i % 10}" for i in range(count)]
        while len(terms) > 1:
            terms = [f"({' OR '.join(terms[i : i + 2])})" for i in range(0, len(terms), 2)]
        try:
            compile_sql92(terms[0])
        except FilterSyntaxError:
            continue  # a few tokens too many
        return terms[0]
    raise AssertionError("no expression fits")


def peak_lag_ms(broker) -> int:
    answer = broker.invoke(RC.GET_BROKER_RUNTIME_INFO)
    assert answer.ok, answer.remark
    return int(fastjson.loads(answer.body)["table"]["eventLoopLagPeakMillis"])


def test_formerly_slow_requests_at_their_limits_keep_the_loop_free(broker):
    before = peak_lag_ms(broker)

    # Batches: the count is checked while decoding, the size before.
    one_byte = Message(TOPIC, b"x")
    at_limit = timed(
        "batch at limit", lambda: send_batch(broker, encode_batch([one_byte] * MAX_BATCH_MESSAGES))
    )
    assert at_limit.ok, at_limit.remark
    over = timed("batch +1", lambda: send_batch(broker, encode_batch([one_byte] * (MAX_BATCH_MESSAGES + 1))))
    assert_refused(over, ResponseCode.MESSAGE_ILLEGAL, f"more than {MAX_BATCH_MESSAGES} messages")
    flood = timed("batch of 170k", lambda: send_batch(broker, encode_batch([one_byte] * 170_000)))
    assert_refused(flood, ResponseCode.MESSAGE_ILLEGAL, f"more than {MAX_BATCH_MESSAGES} messages")
    big = timed(
        "batch over 4 MiB", lambda: send_batch(broker, encode_batch([Message(TOPIC, bytes(4 << 20))]))
    )
    assert_refused(big, ResponseCode.MESSAGE_ILLEGAL, "the limit is 4194304")

    # SQL92: the densest expression allowed is compiled; longer, denser or deeper ones are refused.
    dense = densest_sql(0)
    assert len(dense) <= MAX_SQL_LENGTH
    answered = timed("pull with the densest SQL", lambda: pull_with(broker, dense))
    assert answered.code != ResponseCode.SUBSCRIPTION_PARSE_FAILED, answered.remark
    for label, expression, reason in [
        ("10 MB SQL", "a = 1 AND " * 1_000_000 + "b = 2", f"more than the {MAX_SQL_LENGTH} allowed"),
        ("token-dense SQL", "a IN (" + ",".join(["'x'"] * 1000) + ")", f"more than the {MAX_SQL_TOKENS}"),
        ("deep SQL", "NOT " * 1000 + "a = 1", "levels deep"),
        ("long AND chain", " AND ".join(["a = 1"] * 150), "levels deep"),
    ]:
        refused = timed(f"pull with {label}", lambda e=expression: pull_with(broker, e))
        assert_refused(refused, ResponseCode.SUBSCRIPTION_PARSE_FAILED, reason)
    tags = "||".join(["TagA"] * 2_000_000)
    refused = timed("pull with a 12 MB tag expression", lambda: pull_with(broker, tags, "TAG"))
    assert_refused(refused, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"{MAX_TAG_EXPRESSION_LENGTH} allowed")

    # Heartbeats: a few new dense expressions are compiled; past 16 KiB of SQL the beat is refused.
    fresh = [densest_sql(salt) for salt in range(1, 3)]
    accepted = timed("heartbeat with new dense SQL", lambda: heartbeat_with(broker, fresh))
    assert accepted.ok, accepted.remark
    too_much = [f"a = '{salt}{'x' * (MAX_SQL_LENGTH - 10)}'" for salt in range(5)]  # 5 x 4 KB
    refused = timed("heartbeat with 20 KB of SQL", lambda: heartbeat_with(broker, too_much))
    assert_refused(refused, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "characters in all")

    # A heartbeat of as many new groups as allowed, each created on first use (one write for all).
    with broker.setting("autoCreateSubscriptionGroup", "true", "false"):
        many = timed("heartbeat of 256 new groups", lambda: heartbeat_of_groups(broker, MAX_HEARTBEAT_GROUPS))
        assert many.ok, many.remark
        refused = timed(
            "heartbeat of 257 groups", lambda: heartbeat_of_groups(broker, MAX_HEARTBEAT_GROUPS + 1)
        )
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, f"more than {MAX_HEARTBEAT_GROUPS}")

    # Queues: a topic at the cap is served, its stats answered; 2M queues are refused up front.
    fields = {"topic": "WideTopic", "readQueueNums": 1024, "writeQueueNums": 1024, "perm": 6}
    assert timed("create 1,024 queues", lambda: broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)).ok
    stats = timed(
        "stats of 1,024 queues", lambda: broker.invoke(RC.GET_TOPIC_STATS_INFO, {"topic": "WideTopic"})
    )
    assert stats.ok and len(fastjson.loads(stats.body)["offsetTable"]) == 1024
    consume = timed(
        "consume stats of 1,024 queues",
        lambda: broker.invoke(RC.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": "WideTopic"}),
    )
    assert consume.ok, consume.remark
    huge = {**fields, "topic": "HugeTopic", "readQueueNums": 2_000_000, "writeQueueNums": 2_000_000}
    refused = timed("create 2M queues", lambda: broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, huge))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "2000000 queues", "maxTopicQueueNums=1024")
    assert broker.invoke(RC.GET_TOPIC_STATS_INFO, {"topic": "HugeTopic"}).code == ResponseCode.TOPIC_NOT_EXIST

    peak = peak_lag_ms(broker)
    print(f"event-loop lag peak: {before} ms before these requests, {peak} ms after (bound {BOUND_MS} ms)")
    assert peak < BOUND_MS, f"a request held the broker's loop {peak} ms"


def test_the_queue_cap_is_a_live_setting(broker):
    fields = {"topic": "CappedTopic", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}
    with broker.setting("maxTopicQueueNums", 4, 1024):
        refused = broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "8 queues", "maxTopicQueueNums=4")
        group = {"groupName": "wide-retry", "retryQueueNums": 5}
        refused = broker.invoke(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumps(group))
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "retryQueueNums=5", "maxTopicQueueNums=4")
    assert broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields).ok


def test_topic_and_group_counts_are_capped(broker):
    counted = [t for t in topic_table(broker) if not t.startswith(("%RETRY%", "%DLQ%"))]
    with broker.setting("maxTopicCount", len(counted), 20_000):
        fields = {"topic": "OneTooMany", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
        refused = broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "maxTopicCount=")
        auto = broker.send("AutoOneTooMany")  # auto-creation by a send is refused as well
        assert_refused(auto, ResponseCode.TOPIC_NOT_EXIST, "maxTopicCount")
        existing = {"topic": TOPIC, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
        assert broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, existing).ok  # updating one is not creating
    groups = fastjson.loads(broker.invoke(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)["subscriptionGroupTable"]
    with broker.setting("maxSubscriptionGroupCount", len(groups), 20_000):
        body = fastjson.dumps({"groupName": "one-group-too-many"})
        refused = broker.invoke(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "maxSubscriptionGroupCount=")


def test_offsets_are_taken_only_for_queues_the_broker_has(broker):
    fields = {"consumerGroup": GROUP, "topic": "NoSuchTopic", "queueId": 0, "commitOffset": 1}
    assert_refused(
        broker.invoke(RC.UPDATE_CONSUMER_OFFSET, fields), ResponseCode.TOPIC_NOT_EXIST, "NoSuchTopic"
    )
    fields = {**fields, "topic": TOPIC, "queueId": 2**31 - 1}
    refused = broker.invoke(RC.UPDATE_CONSUMER_OFFSET, fields)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "queueId[2147483647] is illegal")
    assert broker.invoke(RC.UPDATE_CONSUMER_OFFSET, {**fields, "queueId": 0}).ok


def topic_table(broker) -> dict:
    return fastjson.loads(broker.invoke(RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]


def group_table(broker) -> dict:
    return fastjson.loads(broker.invoke(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)["subscriptionGroupTable"]


def test_retry_topics_of_a_group_flood_leave_room_for_real_topics(broker):
    """Attack finding 1: groups made by heartbeats are capped by maxSubscriptionGroupCount, and
    their retry topics do not use up maxTopicCount (which counts the topics clients create)."""
    topics, groups = topic_table(broker), group_table(broker)
    counted = [t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))]
    with (
        broker.setting("autoCreateSubscriptionGroup", "true", "false"),
        broker.setting("maxTopicCount", len(counted) + 1, 20_000),
        broker.setting("maxSubscriptionGroupCount", len(groups) + 5, 20_000),
    ):
        assert heartbeat_of_groups(broker, 12).ok  # as RocketMQ: groups over the cap just get none
        made = set(group_table(broker)) - set(groups)
        retry = {t for t in topic_table(broker) if t.startswith("%RETRY%many-12-")}
        print(f"12 new groups in a heartbeat: {len(made)} created, {len(retry)} retry topics")
        assert len(made) == 5 and retry == {f"%RETRY%{g}" for g in made}
        fields = {"topic": "LegitAfterFlood", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
        created = broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)
        assert created.ok, created.remark
        assert_refused(broker.send("AutoAfterFlood"), ResponseCode.TOPIC_NOT_EXIST, "maxTopicCount")


def test_a_group_over_the_cap_gets_no_retry_topic_nor_offsets(broker):
    """Attack findings 2 and 6: a send-back or an offset commit naming a group the broker may
    not create is refused with the reason, and leaves no retry/DLQ topic, group or offset."""
    sent = broker.send(TOPIC, b"payload")
    assert sent.ok, sent.remark
    offset = decode_offset_msg_id(sent.field("msgId"))[1]
    groups = group_table(broker)
    back = {"offset": offset, "delayLevel": -1, "originTopic": TOPIC, "maxReconsumeTimes": 16}
    commit = {"topic": TOPIC, "queueId": 0, "commitOffset": 1}
    refused = broker.invoke(RC.UPDATE_CONSUMER_OFFSET, {**commit, "consumerGroup": "ghost-off"})
    assert_refused(refused, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "ghost-off")  # as RocketMQ 5
    with (
        broker.setting("autoCreateSubscriptionGroup", "true", "false"),
        broker.setting("maxSubscriptionGroupCount", len(groups), 20_000),
    ):
        refused = broker.invoke(RC.CONSUMER_SEND_MSG_BACK, {**back, "group": "ghost-back"})
        assert_refused(refused, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "maxSubscriptionGroupCount")
        refused = broker.invoke(RC.UPDATE_CONSUMER_OFFSET, {**commit, "consumerGroup": "ghost-on"})
        assert_refused(refused, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "maxSubscriptionGroupCount")
    assert not {"%DLQ%ghost-back", "%RETRY%ghost-back"} & set(topic_table(broker))
    assert set(group_table(broker)) == set(groups)
    offsets = fastjson.loads(broker.invoke(RC.GET_ALL_CONSUMER_OFFSET).body)["offsetTable"]
    assert not [key for key in offsets if "ghost" in key]
