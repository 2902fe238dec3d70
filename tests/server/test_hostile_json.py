"""Hostile JSON bodies and numbers sent raw to a real broker and name server (attack findings 7, 8
and 9): each is refused with a clear remark, no internal exception's name, and nothing but one
line in the process's log (a request must not write a traceback there: 200 of them wrote 25 MB)."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.crc import crc32
from broker.common.request_headers import RegisterBrokerRequestHeader
from broker.remoting.command import create_request
from tests.server.refusals_broker import RefusalBroker, assert_refused

TOPIC, GROUP = "HostileJsonTopic", "hostile-json-group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("hostile-json"))
    broker.create_topic(TOPIC, 1)
    broker.create_group(GROUP)
    yield broker
    broker.stop()


def no_traceback_logged(process) -> None:
    log = "".join(process.output)
    assert "Traceback" not in log, log[log.index("Traceback") - 300 :][:3000]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def heartbeat_body(consumer_fields: bytes = b"", extra: bytes = b"") -> bytes:
    consumer = (
        b'{"groupName":"' + GROUP.encode() + b'","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"subscriptionDataSet":[{"topic":"'
        + TOPIC.encode()
        + b'","subString":"*"}]'
        + consumer_fields
        + b"}"
    )
    return b'{"clientID":"127.0.0.1@hostile"' + extra + b',"consumerDataSet":[' + consumer + b"]}"


@pytest.mark.parametrize(
    "body",
    [
        heartbeat_body(extra=b',"x":' + nested(1100)),  # deeper than orjson reads: 2.2 KB
        b'{{"a":1}:1,"clientID":"x@1","x":' + nested(600) + b"}",  # an object key: our own parser
        b'{{"a":1}:1,"clientID":"x@1","x":' + nested(200_000) + b"}",
    ],
    ids=["1100-deep", "600-deep-object-key", "200000-deep-object-key"],
)
def test_deeply_nested_json_is_refused_with_fastjsons_limit_and_no_traceback(broker, body):
    response = broker.invoke(RC.HEART_BEAT, body=body)
    assert_refused(response, ResponseCode.SYSTEM_ERROR, "nests arrays and objects deeper than", "512")
    assert "RecursionError" not in response.remark and "JsonBodyError" not in response.remark
    no_traceback_logged(broker.cluster.broker)


def test_an_enum_ordinal_past_a_long_is_said_as_sent(broker):
    body = heartbeat_body(b',"messageModel":%d' % 2**70).replace(b'"messageModel":"CLUSTERING",', b"")
    response = broker.invoke(RC.HEART_BEAT, body=body)
    assert_refused(response, ResponseCode.SYSTEM_ERROR, "messageModel 1180591620717411303424 is not a")


def test_a_commit_offset_no_java_long_holds_is_refused_cleanly(broker):
    query = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0}
    before = broker.invoke(RC.QUERY_CONSUMER_OFFSET, query)
    fields = {**query, "commitOffset": 2**70}
    response = broker.invoke(RC.UPDATE_CONSUMER_OFFSET, fields)
    assert_refused(response, ResponseCode.SYSTEM_ERROR, "commitOffset", str(2**70), "Java long")
    assert "ValueError" not in response.remark and "HeaderError" not in response.remark
    no_traceback_logged(broker.cluster.broker)
    after = broker.invoke(RC.QUERY_CONSUMER_OFFSET, query)
    assert (after.code, after.ext_fields) == (before.code, before.ext_fields)  # nothing kept


# -- the name server: compressed registrations (RocketMQ's TopicConfig.encode lines) ---------------
def compressed_body(lines: list[bytes]) -> bytes:
    version = orjson.dumps({"counter": 1, "timestamp": 1})
    out = struct.pack(">i", len(version)) + version + struct.pack(">i", len(lines))
    for line in lines:
        out += struct.pack(">i", len(line)) + line
    return zlib.compress(out + struct.pack(">i", 2) + b"[]")


def register(broker, body: bytes, name: str):
    header = RegisterBrokerRequestHeader(
        broker_name=name, broker_addr="127.0.0.1:1", cluster_name="Forged", ha_server_addr="127.0.0.1:2",
        broker_id=0, compressed=True, body_crc32=crc32(body),
    )  # fmt: skip
    namesrv = broker.cluster.namesrv_addr
    return broker.cluster.admin.invoke(namesrv, create_request(RC.REGISTER_BROKER, header, body))


def route(broker, topic: str):
    request = create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return broker.cluster.admin.invoke(broker.cluster.namesrv_addr, request)


@pytest.mark.parametrize(
    "filter_type",
    [b"GARBAGE", b"1", b"single_tag", b"Z" * 1_000_000],
    ids=["unknown", "ordinal", "lower-case", "1MB"],
)
def test_a_compressed_registration_names_its_topic_filter_type_exactly(broker, filter_type):
    """As TopicConfig.decode (``TopicFilterType.valueOf``): the member's exact name, or the
    whole registration is refused (the JSON form reads names and ordinals, as fastjson)."""
    response = register(broker, compressed_body([b"FilterTypeTopic 1 1 6 " + filter_type]), "forged-filter")
    assert_refused(response, ResponseCode.SYSTEM_ERROR, "topicFilterType", "SINGLE_TAG, MULTI_TAG")
    assert len(response.remark) < 300
    assert route(broker, "FilterTypeTopic").code == ResponseCode.TOPIC_NOT_EXIST
    no_traceback_logged(broker.cluster.namesrv)


def test_unreadable_attributes_of_a_compressed_registration_keep_the_topic(broker):
    """As TopicConfig.decode: attributes that do not parse (here nested past fastjson's limit) are
    left out, and the topic is registered all the same."""
    lines = [
        b'DeepAttrTopic 1 1 6 SINGLE_TAG {"+a":' + nested(100_000) + b"}",
        b"ListAttrTopic 1 1 6 MULTI_TAG [1,2]",
        b'GoodAttrTopic 1 1 6 SINGLE_TAG {"+message.type":"NORMAL"}',
    ]
    response = register(broker, compressed_body(lines), "forged-attributes")
    assert response.code == ResponseCode.SUCCESS, response.remark
    for topic in ("DeepAttrTopic", "ListAttrTopic", "GoodAttrTopic"):
        answer = route(broker, topic)
        assert answer.code == ResponseCode.SUCCESS, (topic, answer.remark)
    no_traceback_logged(broker.cluster.namesrv)


def test_a_group_config_number_past_a_java_int_is_refused_cleanly(broker):
    """Kept, 2^70 failed every later write of the whole group table (orjson writes 64 bits)."""
    for field, value, java in (
        ("retryMaxTimes", 2**70, "int"),
        ("retryQueueNums", 2**31, "int"),
        ("brokerId", 2**63, "long"),
    ):
        body = b'{"groupName":"big-numbers-group","%s":%d}' % (field.encode(), value)
        response = broker.invoke(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        assert_refused(response, ResponseCode.SYSTEM_ERROR, f"{field}={value} does not fit a Java {java}")
    no_traceback_logged(broker.cluster.broker)
    assert b"big-numbers-group" not in broker.invoke(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body
