"""Acceptance 6: request-reply round trips through a real broker, and a request nobody answers
times out with a clear error."""

import threading

import pytest

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    MQBrokerError,
    MQClientError,
    Producer,
    PushConsumer,
    RequestTimeoutError,
    create_reply_message,
)
from broker.common import message_const as const
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from broker.remoting.command import create_request
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.cluster import SEMANTICS_CLUSTER as CLUSTER

TOPIC, SILENT_TOPIC = "RequestTopic", "NobodyAnswers"
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"


cluster = cluster_fixture(ONE_BROKER, topics={TOPIC: 4, SILENT_TOPIC: 2})


@pytest.fixture(scope="module")
def responder(cluster):
    """Answers every request with ``echo:<body>``, through a producer of its own (with its own
    instance name: the broker finds the requester by client id, so ids must differ)."""
    producer = Producer("responder-producer", cluster.namesrv_addr, instance_name="resp-producer").start()

    def answer(messages, context):
        for msg in messages:
            producer.send(create_reply_message(msg, b"echo:" + msg.body))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "responder", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name="resp"
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(answer)
    consumer.start()
    yield
    consumer.shutdown()
    producer.shutdown()


@pytest.fixture
def requester(cluster):
    producer = Producer("requester", cluster.namesrv_addr, instance_name="requester").start()
    yield producer
    producer.shutdown()


def test_request_gets_its_reply(cluster, responder, requester):
    request = Message(TOPIC, b"ping")
    reply = requester.request(request, timeout_ms=15_000)
    assert reply.body == b"echo:ping"
    assert reply.topic == REPLY_TOPIC
    assert (
        reply.properties[const.PROPERTY_CORRELATION_ID] == request.properties[const.PROPERTY_CORRELATION_ID]
    )
    assert reply.properties[const.PROPERTY_MESSAGE_REPLY_TO_CLIENT] == requester.instance.client_id
    assert request.properties[const.PROPERTY_MESSAGE_TTL] == "15000"
    assert reply.properties[const.PROPERTY_MESSAGE_TYPE] == "reply"
    assert const.PROPERTY_PUSH_REPLY_TIME in reply.properties
    # The broker also kept the reply in its cluster's reply topic.
    max_offset = create_request(RequestCode.GET_MAX_OFFSET, {"topic": REPLY_TOPIC, "queueId": 0})
    assert wait_until(lambda: int(cluster.admin.invoke(cluster.broker_addr, max_offset).field("offset")) >= 1)


def test_async_requests_each_get_their_own_reply(cluster, responder, requester):
    replies, done = {}, threading.Event()

    def callback_for(body):
        def callback(reply, error):
            replies[body] = error or reply.body
            if len(replies) == 5:
                done.set()

        return callback

    for i in range(5):
        body = f"req-{i}".encode()
        requester.request_async(Message(TOPIC, body), callback_for(body), timeout_ms=15_000)
    assert done.wait(30)
    assert replies == {f"req-{i}".encode(): f"echo:req-{i}".encode() for i in range(5)}


def test_request_nobody_answers_times_out(cluster, requester):
    with pytest.raises(RequestTimeoutError, match="wait reply message timeout, 300 ms"):
        requester.request(Message(SILENT_TOPIC, b"hello?"), timeout_ms=300)
    assert requester.instance.reply_futures.futures == {}  # nothing left waiting


def test_reply_needs_the_cluster_of_the_request():
    with pytest.raises(MQClientError, match="property\\[CLUSTER\\] is null"):
        create_reply_message(Message("T", b"not stored by a broker"), b"x")


def test_reply_to_an_unknown_client_is_stored_and_says_why(cluster, requester):
    request = Message(TOPIC, b"x", properties={const.PROPERTY_CLUSTER: CLUSTER})
    request.put_property(const.PROPERTY_MESSAGE_REPLY_TO_CLIENT, "10.0.0.1@gone")
    request.put_property(const.PROPERTY_CORRELATION_ID, "no-such-request")
    stored_before = reply_topic_max_offset(cluster)
    # As RocketMQ's broker: a reply it could not push is SYSTEM_ERROR naming the missing requester,
    # even though it stored the reply (the requester may still read it from the reply topic). The
    # responder retries a SYSTEM_ERROR as RocketMQ's producer does, then gives up.
    with pytest.raises(MQClientError, match="failed after retries") as refused:
        requester.send(create_reply_message(request, b"late"))
    broker_said = refused.value.__cause__
    assert isinstance(broker_said, MQBrokerError) and broker_said.response_code == ResponseCode.SYSTEM_ERROR
    assert broker_said.remark == "push reply message fail, channel of <10.0.0.1@gone> not found."
    assert wait_until(lambda: reply_topic_max_offset(cluster) > stored_before)


def reply_topic_max_offset(cluster) -> int:
    request = create_request(RequestCode.GET_MAX_OFFSET, {"topic": REPLY_TOPIC, "queueId": 0})
    return int(cluster.admin.invoke(cluster.broker_addr, request).field("offset"))
