"""Every refusal of the write path (SEND_MESSAGE / batch, CONSUMER_SEND_MSG_BACK, END_TRANSACTION,
SEND_REPLY_MESSAGE) through a real broker: the response code is RocketMQ 4.9's for the same case
and the remark says what was wrong."""

import zlib

import pytest

from broker.common import message_const as const
from broker.common.batch_codec import HEAD, encode_batch
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.common.request_headers.send import SEND_V1_TO_V2
from broker.common.sysflag import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    INNER_BATCH_FLAG,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    send_flag_problem,
)
from tests.server.refusals_broker import READ, RefusalBroker, assert_refused

TOPIC = "RefusalTopic"
GROUP = "refusal-group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("refusals-send"), {"storeReplyMessageEnable": "false"})
    broker.create_topic(TOPIC, 4)
    broker.create_group(GROUP)
    yield broker
    broker.stop()


def stored_offset(broker, topic=TOPIC) -> int:
    """The commit-log offset of a freshly sent message."""
    sent = broker.send(topic, b"payload")
    assert sent.ok, sent.remark
    return decode_offset_msg_id(sent.field("msgId"))[1]


# -- SEND_MESSAGE ---------------------------------------------------------------------------------
def test_send_to_a_broker_that_is_not_writable(broker):
    with broker.permission(READ):
        refused = broker.send(TOPIC)
        assert_refused(refused, ResponseCode.NO_PERMISSION, "sending message is forbidden", "the broker[")
    assert broker.send(TOPIC).ok  # writable again once the permission is reset


def test_send_to_a_read_only_topic(broker):
    broker.create_topic("ReadOnlyTopic", 1, perm=READ)
    refused = broker.send("ReadOnlyTopic")
    assert_refused(
        refused, ResponseCode.NO_PERMISSION, "the topic[ReadOnlyTopic] sending message is forbidden"
    )


def test_send_to_a_queue_the_topic_does_not_have(broker):
    refused = broker.send(TOPIC, queue_id=4)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "queueId[4] is illegal", TOPIC, "4 write queues")


@pytest.mark.parametrize(
    "topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"]
)
def test_send_to_a_topic_only_the_broker_writes(broker, topic):
    # A forged half message or delayed entry would be committed or delivered as if the broker wrote it.
    refused = broker.send(topic)
    assert_refused(refused, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden")


def test_send_to_the_retry_topic_of_an_unknown_group(broker):
    refused = broker.send("%RETRY%no-such-group")
    assert_refused(refused, ResponseCode.TOPIC_NOT_EXIST, "topic[%RETRY%no-such-group] not exist")


def test_send_to_a_retry_topic_whose_group_is_gone(broker):
    broker.create_topic("%RETRY%deleted-group", 1)  # left behind by a deleted group
    refused = broker.send("%RETRY%deleted-group")
    assert_refused(
        refused, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group not exist, deleted-group"
    )


def test_send_with_a_delay_level_that_is_not_a_number(broker):
    refused = broker.send(TOPIC, properties={const.PROPERTY_DELAY_TIME_LEVEL: "soon"})
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "DELAY", "'soon' is not a number")


# -- batches --------------------------------------------------------------------------------------
def send_batch(broker, body: bytes):
    return broker.send(TOPIC, body, code=RC.SEND_BATCH_MESSAGE)


def test_batch_that_is_empty(broker):
    assert_refused(send_batch(broker, b""), ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")


def test_batch_whose_message_claims_more_bytes_than_sent(broker):
    good = encode_batch([Message(TOPIC, b"one"), Message(TOPIC, b"two")])
    refused = send_batch(broker, good[:-3])
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "declares")


def test_batch_with_inconsistent_lengths(broker):
    good = bytearray(encode_batch([Message(TOPIC, b"body")]))
    good[HEAD.size - 4 : HEAD.size] = (2).to_bytes(4, "big")  # body length 2 of a 4-byte body
    refused = send_batch(broker, bytes(good))
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "inconsistent lengths")


def test_batch_cut_inside_a_header(broker):
    refused = send_batch(broker, b"\x00\x00\x00\x30\x00")
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "malformed batch")


def test_batch_of_delayed_messages(broker):
    delayed = Message(TOPIC, b"later", properties={const.PROPERTY_DELAY_TIME_LEVEL: "2"})
    refused = send_batch(broker, encode_batch([delayed, Message(TOPIC, b"now")]))
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "delayed messages cannot be batched")


def test_batch_bigger_than_the_broker_takes(broker):
    batch = encode_batch([Message(TOPIC, b"x" * 600), Message(TOPIC, b"y" * 600)])
    with broker.setting("maxMessageSize", 1024, 4 * 1024 * 1024):
        refused = send_batch(broker, batch)
        assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "the limit is 1024")
        single = broker.send(TOPIC, b"z" * 2000)
        assert_refused(single, ResponseCode.MESSAGE_ILLEGAL, "the limit is 1024")
    assert send_batch(broker, batch).ok


# -- CONSUMER_SEND_MSG_BACK -----------------------------------------------------------------------
def send_back(broker, offset, group=GROUP, **fields):
    header = {
        "offset": offset,
        "group": group,
        "delayLevel": 0,
        "originTopic": TOPIC,
        "maxReconsumeTimes": 16,
    }
    header.update(fields)
    return broker.invoke(RC.CONSUMER_SEND_MSG_BACK, {k: v for k, v in header.items() if v is not None})


def test_send_back_without_an_offset(broker):
    refused = send_back(broker, None)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "lacks the field 'offset'")


def test_send_back_for_an_unknown_group(broker):
    refused = send_back(broker, stored_offset(broker), group="never-created")
    assert_refused(
        refused, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group not exist, never-created"
    )


def test_send_back_to_a_broker_that_is_not_writable(broker):
    offset = stored_offset(broker)
    with broker.permission(READ):
        refused = send_back(broker, offset)
        assert_refused(refused, ResponseCode.NO_PERMISSION, "sending message is forbidden", "the broker[")
    assert send_back(broker, offset).ok


def test_send_back_of_a_message_that_does_not_exist(broker):
    refused = send_back(broker, 1 << 40)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {1 << 40}")


def test_send_back_when_the_retry_topic_is_not_writable(broker):
    broker.create_group("read-only-retry")
    broker.create_topic("%RETRY%read-only-retry", 1, perm=READ)
    refused = send_back(broker, stored_offset(broker), group="read-only-retry")
    assert_refused(
        refused, ResponseCode.NO_PERMISSION, "the topic[%RETRY%read-only-retry] sending message is forbidden"
    )


# -- END_TRANSACTION ------------------------------------------------------------------------------
def end_fields(**overrides):
    fields = {
        "producerGroup": "tx-group",
        "tranStateTableOffset": 0,
        "commitLogOffset": 0,
        "commitOrRollback": TRANSACTION_COMMIT_TYPE,
        "msgId": "00",
        "fromTransactionCheck": "false",
    }
    fields.update(overrides)
    return {k: v for k, v in fields.items() if v is not None}


def test_end_transaction_without_a_producer_group(broker):
    refused = broker.invoke(RC.END_TRANSACTION, end_fields(producerGroup=None))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "lacks the field 'producerGroup'")


def test_end_transaction_on_a_broker_that_is_not_writable(broker):
    with broker.permission(READ):
        refused = broker.invoke(RC.END_TRANSACTION, end_fields())
        assert_refused(refused, ResponseCode.NO_PERMISSION, "the broker does not accept writes now")


def test_end_transaction_with_an_unknown_state(broker):
    refused = broker.invoke(RC.END_TRANSACTION, end_fields(commitOrRollback=5))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "commitOrRollback=5 must be")


def test_end_transaction_of_a_message_that_is_not_a_half_message(broker):
    refused = broker.invoke(RC.END_TRANSACTION, end_fields(commitLogOffset=stored_offset(broker)))
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")


# -- SEND_REPLY_MESSAGE ---------------------------------------------------------------------------
def send_reply(broker, topic, reply_to="10.0.0.1@gone", **fields):
    props = {const.PROPERTY_MESSAGE_REPLY_TO_CLIENT: reply_to, const.PROPERTY_CORRELATION_ID: "c-1"}
    return broker.send(topic, b"reply", properties=props, code=RC.SEND_REPLY_MESSAGE, **fields)


def test_reply_to_a_topic_with_an_illegal_name(broker):
    refused = send_reply(broker, "bad topic!")
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "'bad topic!'", "characters")


def test_reply_to_a_topic_that_does_not_exist(broker):
    refused = send_reply(broker, "NoSuchReplyTopic")
    assert_refused(refused, ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchReplyTopic] not exist")


def test_reply_to_a_topic_only_the_broker_writes(broker):
    refused = send_reply(broker, "SCHEDULE_TOPIC_XXXX")
    assert_refused(
        refused, ResponseCode.NO_PERMISSION, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden"
    )


def test_reply_to_a_client_the_broker_does_not_know_is_refused_when_not_stored(broker):
    # storeReplyMessageEnable=false: a reply that cannot be pushed is lost, so the responder hears it.
    refused = send_reply(broker, "SemanticsCluster_REPLY_TOPIC", reply_to="10.0.0.1@gone")
    assert_refused(
        refused, ResponseCode.SYSTEM_ERROR, "push reply message fail, channel of <10.0.0.1@gone> not found"
    )


def test_reply_without_a_client_to_reply_to(broker):
    refused = send_reply(broker, "SemanticsCluster_REPLY_TOPIC", reply_to="")
    assert_refused(
        refused, ResponseCode.SYSTEM_ERROR, f"properties[{const.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
    )


# -- the store refuses what the processor accepted ------------------------------------------------
SMALL, DEFAULT_MAX = 1024, 4 * 1024 * 1024


def test_send_back_the_store_refuses(broker):
    offset = decode_offset_msg_id(broker.send(TOPIC, b"b" * 2000).field("msgId"))[1]
    with broker.setting("maxMessageSize", SMALL, DEFAULT_MAX):
        refused = send_back(broker, offset)
        assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, f"the limit is {SMALL}")


def test_commit_the_store_refuses(broker):
    half = broker.send(
        TOPIC,
        b"h" * 2000,
        properties={const.PROPERTY_TRANSACTION_PREPARED: "true", const.PROPERTY_PRODUCER_GROUP: "tx-group"},
    )
    assert half.ok, half.remark
    fields = end_fields(
        commitLogOffset=decode_offset_msg_id(half.field("msgId"))[1],
        tranStateTableOffset=half.field("queueOffset"),
    )
    with broker.setting("maxMessageSize", SMALL, DEFAULT_MAX):
        refused = broker.invoke(RC.END_TRANSACTION, fields)
        assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, f"the limit is {SMALL}")
    assert broker.invoke(RC.END_TRANSACTION, fields).ok  # the half message is still pending


def test_reply_the_store_refuses(broker):
    with (
        broker.setting("storeReplyMessageEnable", "true", "false"),
        broker.setting("maxMessageSize", 64, DEFAULT_MAX),
    ):
        refused = broker.send(
            "SemanticsCluster_REPLY_TOPIC",
            b"r" * 200,
            properties={const.PROPERTY_MESSAGE_REPLY_TO_CLIENT: "10.0.0.1@gone"},
            code=RC.SEND_REPLY_MESSAGE,
        )
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "the limit is 64")


# -- sysFlag --------------------------------------------------------------------------------------
# Before: each was stored with SEND_OK and never delivered (the prepared and rollback bits hide a
# record from consumers). -1 and 2**31-1 set them; 1 << 11 names nothing.
BAD_FLAGS = [-1, 2**31 - 1, 1 << 11, TRANSACTION_ROLLBACK_TYPE]


def _v2(fields: dict) -> dict:
    return {SEND_V1_TO_V2.get(name, name): value for name, value in fields.items()}


@pytest.mark.parametrize("sys_flag", BAD_FLAGS)
def test_send_with_a_sys_flag_rocketmq_does_not_define(broker, sys_flag):
    before = broker.invoke(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).field("offset")
    refused = broker.send(TOPIC, sysFlag=sys_flag)
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, f"sysFlag {sys_flag}")
    batch = encode_batch([Message(TOPIC, b"one")])
    assert_refused(
        broker.send(TOPIC, batch, code=RC.SEND_BATCH_MESSAGE, sysFlag=sys_flag),
        ResponseCode.MESSAGE_ILLEGAL,
        f"sysFlag {sys_flag}",
    )
    v2 = _v2({"producerGroup": "refusal-producer", "topic": TOPIC, "defaultTopic": "TBW102",
              "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": sys_flag,
              "bornTimestamp": 0, "flag": 0})  # fmt: skip
    assert_refused(
        broker.invoke(RC.SEND_MESSAGE_V2, v2, b"x"), ResponseCode.MESSAGE_ILLEGAL, f"sysFlag {sys_flag}"
    )
    reply = send_reply(broker, "SemanticsCluster_REPLY_TOPIC", sysFlag=sys_flag)
    assert_refused(reply, ResponseCode.MESSAGE_ILLEGAL, f"sysFlag {sys_flag}")
    assert broker.invoke(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).field("offset") == before


def test_send_with_the_bits_rocketmq_5_clients_set_is_accepted(broker):
    assert "does not define" in (send_flag_problem(1 << 11) or "")
    for sys_flag in (MULTI_TAGS_FLAG, COMPRESSION_TYPE_MASK, BORNHOST_V6_FLAG):
        assert send_flag_problem(sys_flag) is None
    assert broker.send(TOPIC, sysFlag=MULTI_TAGS_FLAG).ok
    # Compressed bodies as RocketMQ 4.9 (zlib, type 0) and 5 (zlib 3, LZ4 1, Zstandard 2) send them.
    zlib_body = zlib.compress(b"compressed " * 100)
    for sys_flag, body in (
        (COMPRESSED_FLAG, zlib_body),
        (COMPRESSED_FLAG | 3 << 8, zlib_body),
        (COMPRESSED_FLAG | 1 << 8, b"\x04\x22\x4d\x18" + b"lz4 frame"),
        (COMPRESSED_FLAG | 2 << 8, b"\x28\xb5\x2f\xfd" + b"zstd frame"),
    ):
        assert broker.send(TOPIC, body, sysFlag=sys_flag).ok, sys_flag


@pytest.mark.parametrize(
    ("sys_flag", "body", "phrase"),
    [
        (0x7F3, b"plain body", "inner batch"),  # the attack's flags: compressed, inner batch and more
        (INNER_BATCH_FLAG, b"plain body", "inner batch"),
        (NEED_UNWRAP_FLAG, b"plain body", "inner batch"),
        (COMPRESSED_FLAG, b"plain body, not zlib", "is no zlib stream"),
        (COMPRESSED_FLAG | 3 << 8, b"", "is no zlib stream"),
        (COMPRESSED_FLAG | 1 << 8, zlib.compress(b"zlib, flagged LZ4"), "is no LZ4 stream"),
        (COMPRESSED_FLAG | 2 << 8, b"plain body", "is no Zstandard stream"),
        (COMPRESSED_FLAG | 5 << 8, zlib.compress(b"x"), "compression type 5"),
    ],
)
def test_a_send_whose_flags_do_not_match_its_body_is_refused(broker, sys_flag, body, phrase):
    # Before: stored with SEND_OK, a message no consumer can decode (a poison message).
    before = broker.invoke(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 3}).field("offset")
    assert_refused(
        broker.send(TOPIC, body, queue_id=3, sysFlag=sys_flag), ResponseCode.MESSAGE_ILLEGAL, phrase
    )
    assert broker.invoke(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 3}).field("offset") == before


def test_a_prepared_send_that_is_no_half_message(broker):
    # Before: stored in the topic with SEND_OK, hidden from consumers for good.
    refused = broker.send(TOPIC, sysFlag=TRANSACTION_PREPARED_TYPE)
    assert_refused(refused, ResponseCode.MESSAGE_ILLEGAL, "prepared transaction", "TRAN_MSG=true")
    half = {const.PROPERTY_TRANSACTION_PREPARED: "true", const.PROPERTY_PRODUCER_GROUP: "refusal-producer"}
    assert broker.send(TOPIC, properties=half, sysFlag=TRANSACTION_PREPARED_TYPE).ok
