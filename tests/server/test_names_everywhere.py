"""Illegal topic and group names (traversal, separators, spaces, too long) are refused on every
request that carries one, by a real broker and name server, with SYSTEM_ERROR and RocketMQ's
"The specified topic/group" remark, and nothing outside the store is ever touched."""

from __future__ import annotations

import time

import pytest

from broker.common import fastjson
from broker.common.batch_codec import encode_batch
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.remoting.command import create_request
from tests.server.refusals_broker import RefusalBroker, assert_refused

TOPIC, GROUP = "NamesTopic", "names-group"
TRAVERSAL = "../../../../tmp/x"
BAD_TOPICS = [TRAVERSAL, "a/b", "bad topic", "naïve", "T" * 128]
BAD_GROUPS = ["a/b", "..", "bad group", "G" * 128]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("names"))
    broker.create_topic(TOPIC, 2)
    broker.create_group(GROUP)
    yield broker
    broker.stop()


def now_ms() -> int:
    return int(time.time() * 1000)


def send_fields(topic: str, group: str = "names-producer") -> dict:
    return {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": now_ms(),
        "flag": 0,
        "properties": "",
        "reconsumeTimes": 0,
    }


def send_v2_fields(topic: str, group: str = "names-producer") -> dict:
    return {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": 0,
        "f": 0,
        "g": now_ms(),
        "h": 0,
        "i": "",
        "j": 0,
    }


def heartbeat(group: str | None = None, topic: str = TOPIC, producer: str | None = None) -> bytes:
    consumer = {
        "groupName": group or GROUP,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [
            {
                "topic": topic,
                "subString": "*",
                "expressionType": "TAG",
                "subVersion": 1,
                "tagsSet": [],
                "codeSet": [],
            }
        ],
        "unitMode": False,
    }
    body = {
        "clientID": "names-client",
        "consumerDataSet": [consumer],
        "producerDataSet": [{"groupName": producer}] if producer else [],
    }
    return fastjson.dumps(body)


def lock_body(topic: str, group: str) -> bytes:
    mq = {"topic": topic, "brokerName": "broker-a", "queueId": 0}
    return fastjson.dumps({"consumerGroup": group, "clientId": "names-client", "mqSet": [mq]})


# Each broker entry point: a request (code, ext fields, body) naming ``topic`` and ``group``.
BROKER_REQUESTS = {
    "send": lambda t, g: (RC.SEND_MESSAGE, send_fields(t), b"x"),
    "send-v2": lambda t, g: (RC.SEND_MESSAGE_V2, send_v2_fields(t), b"x"),
    "send-batch": lambda t, g: (RC.SEND_BATCH_MESSAGE, send_fields(t), encode_batch([Message(t, b"x")])),
    "reply": lambda t, g: (RC.SEND_REPLY_MESSAGE, send_fields(t), b"x"),
    "pull": lambda t, g: (
        RC.PULL_MESSAGE,
        {
            "consumerGroup": g,
            "topic": t,
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 1,
            "sysFlag": 0,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subVersion": 0,
        },
        b"",
    ),
    "heartbeat": lambda t, g: (RC.HEART_BEAT, {}, heartbeat(g, t)),
    "check-client-config": lambda t, g: (
        RC.CHECK_CLIENT_CONFIG,
        {},
        fastjson.dumps(
            {
                "clientId": "c",
                "group": g,
                "subscriptionData": {"topic": t, "subString": "*", "expressionType": "TAG"},
            }
        ),
    ),
    "unregister": lambda t, g: (RC.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": g}, b""),
    "consumer-list": lambda t, g: (RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": g}, b""),
    "query-offset": lambda t, g: (
        RC.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": g, "topic": t, "queueId": 0},
        b"",
    ),
    "update-offset": lambda t, g: (
        RC.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": g, "topic": t, "queueId": 0, "commitOffset": 1},
        b"",
    ),
    "search-offset": lambda t, g: (
        RC.SEARCH_OFFSET_BY_TIMESTAMP,
        {"topic": t, "queueId": 0, "timestamp": 0},
        b"",
    ),
    "max-offset": lambda t, g: (RC.GET_MAX_OFFSET, {"topic": t, "queueId": 0}, b""),
    "min-offset": lambda t, g: (RC.GET_MIN_OFFSET, {"topic": t, "queueId": 0}, b""),
    "earliest-time": lambda t, g: (RC.GET_EARLIEST_MSG_STORETIME, {"topic": t, "queueId": 0}, b""),
    "query-message": lambda t, g: (
        RC.QUERY_MESSAGE,
        {"topic": t, "key": "k", "maxNum": 1, "beginTimestamp": 0, "endTimestamp": now_ms()},
        b"",
    ),
    "create-topic": lambda t, g: (
        RC.UPDATE_AND_CREATE_TOPIC,
        {"topic": t, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
        b"",
    ),
    "delete-topic": lambda t, g: (RC.DELETE_TOPIC_IN_BROKER, {"topic": t}, b""),
    "topic-stats": lambda t, g: (RC.GET_TOPIC_STATS_INFO, {"topic": t}, b""),
    "consumed-by": lambda t, g: (RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t}, b""),
    "create-group": lambda t, g: (
        RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        {},
        fastjson.dumps({"groupName": g}),
    ),
    "delete-group": lambda t, g: (RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": g}, b""),
    "consume-stats": lambda t, g: (RC.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t}, b""),
    "consumer-connections": lambda t, g: (RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": g}, b""),
    "producer-connections": lambda t, g: (RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": g}, b""),
    "reset-offset": lambda t, g: (
        RC.INVOKE_BROKER_TO_RESET_OFFSET,
        {"topic": t, "group": g, "timestamp": -1, "isForce": "true"},
        b"",
    ),
    "running-info": lambda t, g: (RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": g, "clientId": "c"}, b""),
    "consume-directly": lambda t, g: (
        RC.CONSUME_MESSAGE_DIRECTLY,
        {"consumerGroup": g, "clientId": "c"},
        b"",
    ),
    "send-back": lambda t, g: (
        RC.CONSUMER_SEND_MSG_BACK,
        {"offset": 0, "group": g, "delayLevel": 0, "originTopic": t},
        b"",
    ),
    "end-transaction": lambda t, g: (
        RC.END_TRANSACTION,
        {
            "producerGroup": g,
            "tranStateTableOffset": 0,
            "commitLogOffset": 0,
            "commitOrRollback": 8,
            "msgId": "x",
        },
        b"",
    ),
    "lock": lambda t, g: (RC.LOCK_BATCH_MQ, {}, lock_body(t, g)),
    "unlock": lambda t, g: (RC.UNLOCK_BATCH_MQ, {}, lock_body(t, g)),
}
NAMES_TOPIC = {
    "send",
    "send-v2",
    "send-batch",
    "reply",
    "pull",
    "heartbeat",
    "check-client-config",
    "query-offset",
    "update-offset",
    "search-offset",
    "max-offset",
    "min-offset",
    "earliest-time",
    "query-message",
    "create-topic",
    "delete-topic",
    "topic-stats",
    "consumed-by",
    "consume-stats",
    "reset-offset",
    "send-back",
    "lock",
    "unlock",
}
NAMES_GROUP = set(BROKER_REQUESTS) - {
    "search-offset",
    "max-offset",
    "min-offset",
    "earliest-time",
    "query-message",
    "create-topic",
    "delete-topic",
    "topic-stats",
    "consumed-by",
}
# Sends name their producer group, not a consumer group.
PRODUCER_GROUP = {
    "send": send_fields,
    "send-v2": send_v2_fields,
    "send-batch": send_fields,
    "reply": send_fields,
}


@pytest.mark.parametrize("entry", sorted(NAMES_TOPIC))
def test_a_bad_topic_is_refused(broker, entry):
    for topic in BAD_TOPICS:
        code, fields, body = BROKER_REQUESTS[entry](topic, GROUP)
        refused = broker.invoke(code, fields, body)
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The specified topic")
    # The same request with the good name is not refused for its name.
    code, fields, body = BROKER_REQUESTS[entry](TOPIC, GROUP)
    assert "The specified" not in (broker.invoke(code, fields, body).remark or "")


@pytest.mark.parametrize("entry", sorted(NAMES_GROUP))
def test_a_bad_group_is_refused(broker, entry):
    for group in BAD_GROUPS:
        if entry in PRODUCER_GROUP:
            code, _, body = BROKER_REQUESTS[entry](TOPIC, GROUP)
            fields = PRODUCER_GROUP[entry](TOPIC, group)
        else:
            code, fields, body = BROKER_REQUESTS[entry](TOPIC, group)
        refused = broker.invoke(code, fields, body)
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The specified group")


def test_a_heartbeat_with_group_a_slash_b_registers_nothing(broker):
    refused = broker.invoke(RC.HEART_BEAT, {}, heartbeat("a/b"))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The specified group 'a/b'")
    # A good consumer beside a bad producer: the whole heartbeat is refused, nothing registered.
    refused = broker.invoke(RC.HEART_BEAT, {}, heartbeat("fresh-group", producer="a/b"))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The specified group 'a/b'")
    online = broker.invoke(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "fresh-group"})
    assert_refused(online, ResponseCode.CONSUMER_NOT_ONLINE, "fresh-group")
    assert broker.invoke(RC.HEART_BEAT, {}, heartbeat("fresh-group")).ok  # the good heartbeat is taken
    assert broker.invoke(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "fresh-group"}).ok


def test_deleting_a_traversal_topic_leaves_the_outside_alone(broker, tmp_path):
    # An empty directory (what the store's delete removes) reached from consumequeue/ by going up.
    victim = tmp_path / "victim"
    victim.mkdir()
    relative = "../" * 16 + str(victim).lstrip("/")
    refused = broker.invoke(RC.DELETE_TOPIC_IN_BROKER, {"topic": relative})
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The specified topic")
    assert victim.is_dir()


def test_the_name_server_refuses_bad_topics(broker):
    admin, namesrv = broker.cluster.admin, broker.cluster.namesrv_addr
    for topic in BAD_TOPICS:
        route = admin.invoke(namesrv, create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        assert_refused(route, ResponseCode.SYSTEM_ERROR, "The specified topic")
        delete = admin.invoke(namesrv, create_request(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
        assert_refused(delete, ResponseCode.SYSTEM_ERROR, "The specified topic")


def test_the_name_server_refuses_a_registration_naming_a_bad_topic(broker):
    admin, namesrv = broker.cluster.admin, broker.cluster.namesrv_addr
    table = {TRAVERSAL: {"topicName": TRAVERSAL, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}
    body = fastjson.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"counter": 1, "timestamp": 1},
            }
        }
    )
    fields = {
        "brokerName": "fake-broker",
        "brokerAddr": "127.0.0.1:1",
        "clusterName": "DefaultCluster",
        "haServerAddr": "",
        "brokerId": 0,
        "compressed": "false",
        "bodyCrc32": 0,
    }
    refused = admin.invoke(namesrv, create_request(RC.REGISTER_BROKER, fields, body))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "registration refused", "The specified topic")
    route = admin.invoke(namesrv, create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "fake-broker"}))
    assert route.code == ResponseCode.TOPIC_NOT_EXIST  # the fake broker was not registered at all


def test_a_127_character_group_consumes_without_a_retry_topic(broker):
    group = "g" * 127  # legal, but %RETRY% + it would pass the 127-character topic limit
    broker.create_group(group)
    assert broker.invoke(RC.HEART_BEAT, {}, heartbeat(group)).ok
    topics = fastjson.loads(broker.invoke(RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert "%RETRY%" + group not in topics  # never made, so never registered with the name server
    back = {"offset": 0, "group": group, "delayLevel": 0, "originTopic": TOPIC}
    refused = broker.invoke(RC.CONSUMER_SEND_MSG_BACK, back)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "has no retry or dead-letter topic", "longer than 127")
    assert broker.invoke(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}).ok  # it is online


@pytest.mark.parametrize("queues", [-1, 65537, 2_000_000])
def test_the_name_server_refuses_a_registration_with_impossible_queue_counts(broker, queues):
    admin, namesrv = broker.cluster.admin, broker.cluster.namesrv_addr
    table = {"Forged": {"topicName": "Forged", "readQueueNums": queues, "writeQueueNums": 1, "perm": 6}}
    wrapper = {"topicConfigTable": table, "dataVersion": {"counter": 1, "timestamp": 1}}
    body = fastjson.dumps({"topicConfigSerializeWrapper": wrapper})
    fields = {
        "brokerName": "forging-broker",
        "brokerAddr": "127.0.0.1:2",
        "clusterName": "DefaultCluster",
        "haServerAddr": "",
        "brokerId": 0,
        "compressed": "false",
        "bodyCrc32": 0,
    }
    refused = admin.invoke(namesrv, create_request(RC.REGISTER_BROKER, fields, body))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, f"readQueueNums={queues}", "between 0 and 65536")
