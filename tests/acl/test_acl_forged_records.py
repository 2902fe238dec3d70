"""What the checks of the stored message (test_acl_stored_message) left open, on a real name
server and broker with plain ACL on (the ACL attack on issue 31, section 3).

- A record laid out inside a message body, at an offset a client names: its declared length
  runs over the records written after it, so CONSUMER_SEND_MSG_BACK copied a denied message into
  the sender's retry topic and END_TRANSACTION committed it into an allowed topic.
- HEART_BEAT registered producers of any group (and so received the transaction checks of its
  half messages); UNREGISTER_CLIENT removed another account's producer.
- An account reading every topic by default pulled the half and schedule topics, which hold the
  messages of denied topics.
- CONSUME_MESSAGE_DIRECTLY without a msgId handed the caller's own body to another consumer.
- A group's clients, subscriptions and offsets were readable without permission on the group.

Figures before the fixes: 1 denied message leaked by a forged send-back, 1 by a forged commit;
a producer of a foreign group registered and another removed (answer 0 each); 2 denied bodies
pulled from the half and schedule topics; 1 forged message consumed; 4 group metadata reads
answered. After: 0 each, refused.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import orjson
import pytest

from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
from broker.client.push_consumer import ConsumeConcurrentlyStatus
from broker.common import message_const as const
from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import MessageExt
from broker.common.message_codec import FIXED_V4, MESSAGE_MAGIC_CODE, decode_messages, encode_message
from broker.common.message_codec import properties_to_string as props_text
from broker.common.topic_config import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from broker.local_cluster import wait_until
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .acl_cluster import ADMIN, DENIED, GROUP, PRODUCER_GROUP, TOPIC, broker_acl, start_acl_cluster, write_acl
from .test_acl_stored_message import _half, _pulled_bodies, _send

NO_PERMISSION = ResponseCode.NO_PERMISSION
# Reads and writes every topic but AclDenied, and consumes as any group: RocketMQ's lax account.
LAX = SessionCredentials("acl-lax-key", "acl-lax-secret")
VICTIM_GROUP = "AclVictimGroup"  # consumed by an admin-signed consumer; USER has no permission on it
FORGED_BODY = 20_000  # what the forged record claims: it runs over the records written after it


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    levels = {"messageDelayLevel": "1s 1s 1s 1s 1s 1s 1s 1s"}
    running = start_acl_cluster(tmp_path_factory.mktemp("acl-forged"), levels)
    lax = SyncRemotingClient(LAX)
    try:
        config = broker_acl()
        config["accounts"].append({"accessKey": LAX.access_key, "secretKey": LAX.secret_key,
                                   "defaultTopicPerm": "PUB|SUB", "defaultGroupPerm": "SUB",
                                   "topicPerms": [f"{DENIED}=DENY"]})  # fmt: skip
        write_acl(running.acl_path, config)
        for topic in (TOPIC, DENIED):
            running.create_topic(topic, queues=1)
        probe = {"topic": TOPIC, "queueId": 0}
        wait_until(lambda: running.request(lax, RC.GET_MAX_OFFSET, probe).ok, timeout=10, what="lax account")
        running.others["lax"] = lax
        yield running
    finally:
        lax.close()
        running.stop()


# -- a record forged inside a body ----------------------------------------------------------------
def _forge(acl, secret: bytes, topic: str, properties: dict) -> int:
    """Lay out a record header in USER's message, let the admin write ``secret`` to DENIED, then
    end the forged record (its topic and properties) inside a later message of USER's. Returns the
    forged record's offset: its body covers ``secret``'s record."""
    props = props_text(properties).encode()
    tail = bytes([len(topic)]) + topic.encode() + struct.pack(">h", len(props)) + props
    host = bytes([127, 0, 0, 1]) + struct.pack(">i", 1)
    total = FIXED_V4.size + FORGED_BODY + len(tail)
    for _ in range(3):  # another writer (the schedule service) between the probes spoils the layout
        _, first = _send(acl, acl.user, TOPIC, b"p")
        _, second = _send(acl, acl.user, TOPIC, b"p")
        # The next message's body, with its own offset in it as a broker writes a record's.
        forged = 2 * second - first + FIXED_V4.size
        fields = (total, MESSAGE_MAGIC_CODE, 0, 0, 0, 123456, forged, 0, 0, host, 0, host, 0, 0, FORGED_BODY)
        header = FIXED_V4.pack(*fields)
        _, carrier = _send(acl, acl.user, TOPIC, header)
        _send(acl, acl.admin, DENIED, secret)
        _, first = _send(acl, acl.user, TOPIC, b"p")
        _, second = _send(acl, acl.user, TOPIC, b"p")
        closing = 2 * second - first  # where the next message of USER's will start
        padding = forged + FIXED_V4.size + FORGED_BODY - (closing + FIXED_V4.size)
        _, written = _send(acl, acl.user, TOPIC, b"\0" * padding + tail + b"\0" * 16)
        if written == closing and carrier + FIXED_V4.size == forged:
            return forged
    raise AssertionError("the forged record could not be laid out")


def _leaked(bodies: list[bytes], secret: bytes) -> int:
    return sum(secret in body for body in bodies)


def _damaged_ranges(acl) -> int:
    """The broker's count of quarantined damaged commit-log ranges (its damaged-data alarm)."""
    answer = acl.request(acl.admin, RC.GET_BROKER_RUNTIME_INFO)
    return int(orjson.loads(answer.body)["table"]["commitLogDamagedRanges"])


def test_a_send_back_at_an_offset_inside_a_body_copies_nothing(acl):
    secret = b"SECRET of AclDenied: sent back through a forged record"
    forged = _forge(acl, secret, TOPIC, {})
    fields = {"offset": forged, "group": GROUP, "delayLevel": 1, "originTopic": TOPIC,
              "maxReconsumeTimes": 16}  # fmt: skip
    answer = acl.request(acl.user, RC.CONSUMER_SEND_MSG_BACK, fields)
    assert answer.code == ResponseCode.SYSTEM_ERROR, (answer.code, answer.remark)  # before: 0
    assert "look message by offset failed" in answer.remark
    viewed = acl.request(acl.user, RC.VIEW_MESSAGE_BY_ID, {"offset": forged})
    assert viewed.code == ResponseCode.SYSTEM_ERROR and "can not find message" in viewed.remark
    # An ordinary account's forged record is no damage of the log: no alarm, nothing quarantined.
    assert _damaged_ranges(acl) == 0  # before: 1 (the carrier's tail quarantined, reported as damage)
    time.sleep(1.5)  # a level-1 retry (1 s) would be due by now
    assert _leaked(_pulled_bodies(acl, acl.user, f"%RETRY%{GROUP}", GROUP), secret) == 0  # before: 1
    # The same account's real message still goes back.
    _, own = _send(acl, acl.user, TOPIC, b"own message sent back")
    assert acl.request(acl.user, RC.CONSUMER_SEND_MSG_BACK, {**fields, "offset": own}).ok


def test_a_forged_half_message_cannot_be_committed(acl):
    secret = b"SECRET of AclDenied: committed through a forged half"
    half = {const.PROPERTY_REAL_TOPIC: TOPIC, const.PROPERTY_REAL_QUEUE_ID: "0",
            const.PROPERTY_PRODUCER_GROUP: PRODUCER_GROUP,
            const.PROPERTY_TRANSACTION_PREPARED: "true"}  # fmt: skip
    forged = _forge(acl, secret, TRANS_HALF_TOPIC, half)
    fields = {"producerGroup": PRODUCER_GROUP, "tranStateTableOffset": 123456, "commitLogOffset": forged,
              "commitOrRollback": 8, "msgId": "X", "fromTransactionCheck": "false"}  # fmt: skip
    answer = acl.request(acl.user, RC.END_TRANSACTION, fields)
    assert not answer.ok and "Find prepared transaction message failed" in answer.remark
    assert _damaged_ranges(acl) == 0  # before: 1 more
    time.sleep(0.5)
    header = {"consumerGroup": GROUP, "topic": TOPIC}
    assert _leaked(_pulled_bodies_from(acl, acl.admin, header), secret) == 0  # before: 1


def _pulled_bodies_from(acl, client, header) -> list[bytes]:
    """Every body of queue 0 of the header's topic, 32 at a time."""
    bodies: list[bytes] = []
    while True:
        before = len(bodies)
        bodies += _pull(acl, client, header["topic"], header["consumerGroup"], offset=before)
        if len(bodies) == before:
            return bodies


def _pull_fields(topic, group, offset=0, queue=0) -> dict:
    return {"consumerGroup": group, "topic": topic, "queueId": queue, "queueOffset": offset,
            "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0}  # fmt: skip


def _pull(acl, client, topic, group, offset=0, queue=0) -> list[bytes]:
    pulled = acl.request(client, RC.PULL_MESSAGE, _pull_fields(topic, group, offset, queue))
    return [m.body for m in decode_messages(pulled.body)] if pulled.ok else []


# -- producer groups ------------------------------------------------------------------------------
def _heartbeat(acl, client, client_id, producer_groups):
    body = {"clientID": client_id, "producerDataSet": [{"groupName": g} for g in producer_groups],
            "consumerDataSet": []}  # fmt: skip
    return acl.request(client, RC.HEART_BEAT, body=orjson.dumps(body))


def _producers(acl, group) -> bytes:
    answer = acl.request(acl.admin, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
    assert answer.ok, answer.remark
    return answer.body


def test_producers_register_and_unregister_only_in_their_own_groups(acl):
    other = "AclOtherProducer"
    refused = _heartbeat(acl, acl.user, "127.0.0.1@forged-producer", [other])
    assert refused.code == NO_PERMISSION and f"group {other}" in refused.remark  # before: 0
    assert b"forged-producer" not in _producers(acl, other)
    # Its own group, and the group every client registers for its own send-backs, still pass.
    assert _heartbeat(acl, acl.user, "127.0.0.1@own-producer", [PRODUCER_GROUP, "CLIENT_INNER_PRODUCER"]).ok
    assert _heartbeat(acl, acl.admin, "127.0.0.1@victim-producer", [other]).ok
    victim = {"clientID": "127.0.0.1@victim-producer", "producerGroup": other}
    gone = acl.request(acl.user, RC.UNREGISTER_CLIENT, victim)
    assert gone.code == NO_PERMISSION and f"group {other}" in gone.remark  # before: 0, and removed
    assert b"victim-producer" in _producers(acl, other)
    refused = acl.request(acl.user, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": other})
    assert refused.code == NO_PERMISSION  # before: 0 with the victim's address


# -- the broker's own topics ----------------------------------------------------------------------
def test_an_ordinary_account_pulls_no_half_or_schedule_topic(acl):
    half_body, delayed_body = b"SECRET half of AclDenied", b"SECRET delayed of AclDenied"
    _half(acl, DENIED, half_body)
    _send(acl, acl.admin, DENIED, delayed_body, {const.PROPERTY_DELAY_TIME_LEVEL: "8"})
    reads = ((TRANS_HALF_TOPIC, 0, half_body), (SCHEDULE_TOPIC, 7, delayed_body))
    for topic, queue, body in reads:
        admin_pull = (acl, acl.admin, topic, "AclAdminReads", 0, queue)

        def admin_reads(b: bytes = body, a: tuple = admin_pull) -> bool:
            return b in _pull(*a)

        wait_until(admin_reads, timeout=10, what=f"{topic} for the admin")
        fields = _pull_fields(topic, "AclLaxReads", queue=queue)
        refused = acl.request(acl.others["lax"], RC.PULL_MESSAGE, fields)
        assert refused.code == NO_PERMISSION, (topic, refused.code)  # before: 0 with the body
        assert f"topic {topic}" in refused.remark and "admin account" in refused.remark
    fields = _pull_fields(TOPIC, "AclLaxReads")
    read = acl.request(acl.others["lax"], RC.PULL_MESSAGE, fields)
    assert read.code != NO_PERMISSION, read.remark  # its ordinary topics still read


# -- another group's consumer ---------------------------------------------------------------------
@dataclass
class Victim:
    """Another group's consumer: its client id and what it consumed."""

    client_id: str
    received: list[tuple[str, bytes]]


@pytest.fixture(scope="module")
def victim(acl):
    received: list[tuple[str, bytes]] = []

    def listener(msgs, context):
        received.extend((m.topic, m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(VICTIM_GROUP, acl.namesrv_addr, credentials=ADMIN, instance_name="acl-victim",
                            consume_from_where=CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        group = {"consumerGroup": VICTIM_GROUP}
        wait_until(lambda: acl.request(acl.admin, RC.GET_CONSUMER_CONNECTION_LIST, group).ok, timeout=20)
        assert consumer.instance is not None  # started
        yield Victim(consumer.instance.client_id, received)
    finally:
        consumer.shutdown()


def test_a_direct_consume_hands_over_only_a_stored_message(acl, victim):
    client_id = victim.client_id
    forged = bytes(encode_message(MessageExt(DENIED, b"FORGED by the lax account")))
    fields = {"consumerGroup": VICTIM_GROUP, "clientId": client_id}
    answer = _direct(acl, fields, forged)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "msgId" in answer.remark, (answer.code, answer.remark)
    assert (DENIED, b"FORGED by the lax account") not in victim.received  # before: consumed
    sent, _ = _send(acl, acl.admin, TOPIC, b"directly, by id")
    by_id = {**fields, "msgId": sent.ext_fields["msgId"]}
    answer = _direct(acl, by_id, forged)
    assert answer.ok, answer.remark
    assert (TOPIC, b"directly, by id") in victim.received


def _direct(acl, fields, body):
    return acl.others["lax"].invoke(
        acl.broker_addr, create_request(RC.CONSUME_MESSAGE_DIRECTLY, fields, body), 15_000
    )


def test_a_groups_clients_and_offsets_need_permission_on_the_group(acl, victim):
    client_id = victim.client_id
    reads = (
        (RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": VICTIM_GROUP}),
        (RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": VICTIM_GROUP, "clientId": client_id}),
        (RC.GET_CONSUME_STATS, {"consumerGroup": VICTIM_GROUP, "topic": TOPIC}),
        (RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": DENIED}),
    )
    answered = [code for code, fields in reads if acl.request(acl.user, code, fields).code != NO_PERMISSION]
    assert answered == []  # before: all 4 answered 0
    for code, fields in reads:
        assert acl.request(acl.admin, code, fields).ok, code  # the console's admin account still reads


def test_the_consoles_delayed_and_transactions_pages_read_with_an_admin_account(acl):
    """The console (ROCKETMQ_ACCESS_KEY) reads the schedule and half topics with its admin account;
    signed as an ordinary account the same reads are refused, not answered empty."""
    from broker.client.admin import MQAdmin, MQClientError
    from console.services.delayed import pending_of_level
    from console.services.transactions import pending_half_messages

    _half(acl, DENIED, b"half for the console")
    _send(acl, acl.admin, DENIED, b"delayed for the console", {const.PROPERTY_DELAY_TIME_LEVEL: "8"})
    admin = MQAdmin(acl.namesrv_addr, credentials=ADMIN)
    lax = MQAdmin(acl.namesrv_addr, credentials=LAX)
    try:
        halves = [h.message.body for h in pending_half_messages(admin)]
        assert b"half for the console" in halves
        status, _pending = pending_of_level(admin, "broker-acl", acl.broker_addr, 8)
        assert status.max_offset >= 1
        with pytest.raises(MQClientError, match="only an admin account may use it"):
            pending_half_messages(lax)
    finally:
        admin.close()
        lax.close()
