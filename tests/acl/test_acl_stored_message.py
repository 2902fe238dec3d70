"""ACL checks the stored message a request names by offset, not only the request's header
(issue 31, section 3), on a real name server and broker with plain ACL on.

USER is denied AclDenied. Before this check it could copy an AclDenied message into its own
retry topic with CONSUMER_SEND_MSG_BACK (naming an allowed originTopic) and pull it, read every
message by walking the commit log with VIEW_MESSAGE_BY_ID, and commit another producer's half
message with END_TRANSACTION; an account with a default SUB could read half messages of a denied
topic with QUERY_MESSAGE on the half topic, and have a denied message handed to its consumer with
CONSUME_MESSAGE_DIRECTLY. Figures before the fix: 1 denied message pulled after a send-back, 3 of
3 denied messages read by walking, 1 half message committed, 1 half message found by key, 1
denied message consumed directly; after: 0 each.
"""

from __future__ import annotations

import time

import pytest

from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
from broker.client.push_consumer import ConsumeConcurrentlyStatus
from broker.common import message_const as const
from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import decode_message, decode_messages, decode_offset_msg_id
from broker.common.message_codec import properties_to_string as props_text
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.common.request_headers import PullMessageRequestHeader
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from broker.common.topic_config import TRANS_HALF_TOPIC
from broker.local_cluster import wait_until
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .acl_cluster import DENIED, GROUP, PRODUCER_GROUP, TOPIC, USER, broker_acl, start_acl_cluster, write_acl

NO_PERMISSION = ResponseCode.NO_PERMISSION
RETRY = f"%RETRY%{GROUP}"
# Reads every topic but AclDenied (its default is SUB): the query test's account.
READER = SessionCredentials("acl-reader-key", "acl-reader-secret")


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    running = start_acl_cluster(
        tmp_path_factory.mktemp("acl-stored"), {"messageDelayLevel": "1s 1s 1s 1s 1s 1s 1s 1s"}
    )
    reader = SyncRemotingClient(READER)
    try:
        config = broker_acl()
        config["accounts"].append({"accessKey": READER.access_key, "secretKey": READER.secret_key,
                                   "defaultTopicPerm": "SUB", "topicPerms": [f"{DENIED}=DENY"]})  # fmt: skip
        write_acl(running.acl_path, config)
        for topic in (TOPIC, DENIED):
            running.create_topic(topic, queues=1)
        wait_until(lambda: _max_offset(running, reader, TOPIC).ok, timeout=10, what="the reader account")
        running.others["reader"] = reader
        yield running
    finally:
        reader.close()
        running.stop()


def _max_offset(acl, client, topic):
    return acl.request(client, RC.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})


def _send(acl, client, topic, body, properties=None, sys_flag=0):
    fields = {
        "producerGroup": PRODUCER_GROUP,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 1,
        "queueId": 0,
        "sysFlag": sys_flag,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 0,
        "properties": props_text(properties or {}),
        "reconsumeTimes": 0,
    }
    sent = acl.request(client, RC.SEND_MESSAGE, fields, body)
    assert sent.ok, sent.remark
    return sent, decode_offset_msg_id(sent.ext_fields["msgId"])[1]


def _send_back(acl, offset, delay_level=1):
    fields = {"offset": offset, "group": GROUP, "delayLevel": delay_level, "originTopic": TOPIC,
              "maxReconsumeTimes": 16}  # fmt: skip
    return acl.request(acl.user, RC.CONSUMER_SEND_MSG_BACK, fields)


def _pulled_bodies(acl, client, topic, group) -> list[bytes]:
    header = PullMessageRequestHeader(group, topic, 0, 0, 32, FLAG_SUBSCRIPTION, -1, 0, 0, "*", "TAG")
    pulled = acl.request(client, RC.PULL_MESSAGE, header)
    if pulled.code != ResponseCode.SUCCESS:
        return []
    return [m.body for m in decode_messages(pulled.body)]


def _refused(response, *phrases):
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    for phrase in phrases:
        assert phrase in response.remark, response.remark


def test_a_denied_message_cannot_be_sent_back_into_the_own_retry_topic(acl):
    _, denied_offset = _send(acl, acl.admin, DENIED, b"denied: sent back")
    _, allowed_offset = _send(acl, acl.admin, TOPIC, b"allowed: sent back")
    _refused(_send_back(acl, denied_offset), USER.access_key, f"topic {DENIED}")
    assert _send_back(acl, allowed_offset).ok  # the consumer's own message still goes back

    def retried() -> list[bytes]:
        return _pulled_bodies(acl, acl.user, RETRY, GROUP)

    wait_until(lambda: b"allowed: sent back" in retried(), timeout=15, what="the allowed retry")
    assert b"denied: sent back" not in retried()  # before: pulled (1 -> 0)


def test_walking_view_message_by_id_reads_no_denied_message(acl):
    denied = [_send(acl, acl.admin, DENIED, f"denied: walked {i}".encode())[1] for i in range(3)]
    _, allowed = _send(acl, acl.admin, TOPIC, b"allowed: walked")
    read_denied = 0
    for offset in denied:
        viewed = acl.request(acl.user, RC.VIEW_MESSAGE_BY_ID, {"offset": offset})
        if viewed.ok:
            read_denied += decode_message(viewed.body).topic == DENIED
        else:
            _refused(viewed, f"topic {DENIED}")
    assert read_denied == 0  # before: 3 of 3
    viewed = acl.request(acl.user, RC.VIEW_MESSAGE_BY_ID, {"offset": allowed})
    assert viewed.ok and decode_message(viewed.body).body == b"allowed: walked", viewed.remark
    # An offset inside a record is no message: refused as unknown, never its bytes.
    inside = acl.request(acl.user, RC.VIEW_MESSAGE_BY_ID, {"offset": allowed + 8})
    assert inside.code == ResponseCode.SYSTEM_ERROR and "can not find message" in inside.remark


def _half(acl, topic, body, group=PRODUCER_GROUP):
    properties = {const.PROPERTY_TRANSACTION_PREPARED: "true", const.PROPERTY_PRODUCER_GROUP: group}
    sent, offset = _send(acl, acl.admin, topic, body, properties, TRANSACTION_PREPARED_TYPE)
    return {
        "producerGroup": group,
        "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": offset,
        "commitOrRollback": TRANSACTION_COMMIT_TYPE,
        "msgId": sent.ext_fields["msgId"],
        "fromTransactionCheck": "true",
    }


def test_another_producers_half_message_cannot_be_committed(acl):
    before = int(_max_offset(acl, acl.admin, DENIED).ext_fields["offset"])
    fields = _half(acl, DENIED, b"denied: half")
    _refused(acl.request(acl.user, RC.END_TRANSACTION, fields), f"PUB permission on topic {DENIED}")
    other_group = _half(acl, TOPIC, b"allowed: half of another group", group="AclOtherProducer")
    _refused(acl.request(acl.user, RC.END_TRANSACTION, other_group), "group AclOtherProducer")
    assert int(_max_offset(acl, acl.admin, DENIED).ext_fields["offset"]) == before  # before: +1
    # Its owner still can: the half was not resolved (a second end would be refused as "already").
    assert acl.request(acl.admin, RC.END_TRANSACTION, fields).ok
    wait_until(lambda: int(_max_offset(acl, acl.admin, DENIED).ext_fields["offset"]) == before + 1)


def test_query_by_key_finds_no_message_of_a_denied_topic(acl):
    key = f"half-key-{time.time_ns()}"
    half = {const.PROPERTY_TRANSACTION_PREPARED: "true", const.PROPERTY_PRODUCER_GROUP: PRODUCER_GROUP,
            const.PROPERTY_KEYS: key}  # fmt: skip
    _send(acl, acl.admin, DENIED, b"denied: queried", half, TRANSACTION_PREPARED_TYPE)
    _send(acl, acl.admin, TOPIC, b"allowed: queried", {const.PROPERTY_KEYS: key})
    now = int(time.time() * 1000)

    def query(topic):
        fields = {"topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": now + 60_000}
        return acl.request(acl.others["reader"], RC.QUERY_MESSAGE, fields)

    def found(topic) -> list[bytes]:
        answer = query(topic)
        return [m.body for m in decode_messages(answer.body)] if answer.ok else []

    wait_until(lambda: found(TOPIC) == [b"allowed: queried"], timeout=10, what="the indexed key")
    assert found(TRANS_HALF_TOPIC) == []  # before: [b"denied: queried"]
    # The half topic is the broker's own: only an admin account may query it at all.
    _refused(query(TRANS_HALF_TOPIC), "only an admin account")
    _refused(query(DENIED), f"topic {DENIED}")


def test_a_denied_message_is_not_handed_to_a_consumer_directly(acl):
    received: list[bytes] = []

    def listener(msgs, context):
        received.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, acl.namesrv_addr, credentials=USER, instance_name="acl-direct",
                            consume_from_where=CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert consumer.instance is not None  # started
        client_id = consumer.instance.client_id
        wait_until(
            lambda: _direct(acl, client_id, TOPIC, b"allowed: direct").ok, timeout=20, what="a direct consume"
        )
        assert b"allowed: direct" in received
        _refused(_direct(acl, client_id, DENIED, b"denied: direct"), f"topic {DENIED}")
        assert b"denied: direct" not in received  # before: handed to the consumer (1 -> 0)
    finally:
        consumer.shutdown()


def _direct(acl, client_id, topic, body):
    sent, _ = _send(acl, acl.admin, topic, body)
    fields = {"consumerGroup": GROUP, "clientId": client_id, "msgId": sent.ext_fields["msgId"]}
    return acl.user.invoke(acl.broker_addr, create_request(RC.CONSUME_MESSAGE_DIRECTLY, fields), 15_000)
