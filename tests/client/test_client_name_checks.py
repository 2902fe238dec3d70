"""The SDK and mqadmin refuse an illegal topic or group before anything is sent (RocketMQ's
Validators.checkGroup / checkTopic), with the reason the broker would give; and the SDK splits
batches at the broker's message count."""

import pytest

from broker.client import Producer, PushConsumer
from broker.client.admin import MQAdmin
from broker.client.errors import MQClientError
from broker.client.outgoing_message import split_batches
from broker.common.batch_codec import MAX_BATCH_MESSAGES
from broker.common.message import Message

UNREACHABLE = "127.0.0.1:9"  # nothing is ever sent there: each check comes first


@pytest.mark.parametrize("group", ["a/b", "bad group", "g" * 128, ""])
def test_a_producer_or_consumer_with_an_illegal_group_does_not_start(group):
    with pytest.raises(MQClientError, match="The specified group"):
        Producer(group, UNREACHABLE).start()
    consumer = PushConsumer(group, UNREACHABLE)
    consumer.subscribe("GoodTopic", "*")
    consumer.register_message_listener(lambda messages, context: None)
    with pytest.raises(MQClientError, match="The specified group"):
        consumer.start()


def test_a_consumer_cannot_subscribe_to_an_illegal_topic():
    with pytest.raises(MQClientError, match="The specified topic"):
        PushConsumer("good-group", UNREACHABLE).subscribe("../../x", "*")


def test_mqadmin_refuses_illegal_names_before_sending():
    with MQAdmin(UNREACHABLE, timeout=0.5) as admin:
        with pytest.raises(MQClientError, match="invalid group: The specified group 'a/b'"):
            admin.create_or_update_subscription_group(UNREACHABLE, "a/b")
        with pytest.raises(MQClientError, match="invalid group"):
            admin.delete_subscription_group(UNREACHABLE, "..")
        with pytest.raises(MQClientError, match="invalid topic"):
            admin.delete_topic("../../../../tmp/x")
        with pytest.raises(MQClientError, match="invalid topic"):
            admin.create_or_update_topic(UNREACHABLE, "a/b")


def test_the_sdk_splits_batches_at_the_brokers_message_count():
    batches = split_batches([Message("T", b"x")] * (2 * MAX_BATCH_MESSAGES + 1))
    assert [len(b) for b in batches] == [MAX_BATCH_MESSAGES, MAX_BATCH_MESSAGES, 1]
