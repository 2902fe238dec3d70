"""``ClientAPI.pull`` refused by a real broker: a pull that relies on the group's registered
subscription (no subscription flag) from a client that never sent a heartbeat gets RocketMQ's
SUBSCRIPTION_NOT_EXIST with the broker's remark, raised as an error that delivers nothing; the same
pull carrying its subscription gets the message that is there."""

from __future__ import annotations

import asyncio

import pytest

from broker.client.admin import MQAdmin
from broker.client.client_api import ClientAPI
from broker.client.errors import MQBrokerError
from broker.client.producer import Producer
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.common.request_headers import PullMessageRequestHeader, PullMessageResponseHeader
from broker.remoting.client import RemotingClient
from tests.cluster import CLI, start

TOPIC, GROUP = "PullRefusedTopic", "pull-refused-group"


@pytest.fixture(scope="module")
def broker_with_a_message(tmp_path_factory):
    cluster = start(CLI, tmp_path_factory.mktemp("pull-refused"), brokers=("broker-a",))
    try:
        with MQAdmin(cluster.namesrv_addr) as admin:
            (addr,) = admin.resolve_masters(None, "CliCluster")
            admin.create_or_update_topic(addr, TOPIC, 1, 1)
        producer = Producer("pull-refused-producer", cluster.namesrv_addr).start()
        try:
            sent = producer.send(Message(TOPIC, b"still here"))
        finally:
            producer.shutdown()
        assert sent.message_queue.queue_id == 0
        yield addr
    finally:
        cluster.stop()


def pull(addr: str, sys_flag: int, found: list) -> tuple[int, PullMessageResponseHeader]:
    header = PullMessageRequestHeader(
        GROUP, TOPIC, queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
        suspend_timeout_millis=0, sub_version=0, subscription="*", expression_type="TAG",
    )  # fmt: skip

    async def run():
        remoting = RemotingClient()
        try:
            return await ClientAPI(remoting).pull(addr, header, 5000, found.extend)
        finally:
            await remoting.close()

    return asyncio.run(run())


def test_a_pull_without_a_registered_subscription_is_refused_and_delivers_nothing(broker_with_a_message):
    found: list = []
    with pytest.raises(MQBrokerError) as refused:
        pull(broker_with_a_message, 0, found)
    assert refused.value.response_code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert refused.value.remark == f"the consumer's subscription not exist, group: {GROUP}"
    assert "SUBSCRIPTION_NOT_EXIST" in str(refused.value)
    assert found == []


def test_the_same_pull_with_its_subscription_gets_the_message(broker_with_a_message):
    found: list = []
    code, fields = pull(broker_with_a_message, FLAG_SUBSCRIPTION, found)
    assert code == ResponseCode.SUCCESS and fields.next_begin_offset == 1
    assert [m.body for m in found] == [b"still here"]
