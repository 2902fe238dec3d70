"""Every refusal of the read path (PULL_MESSAGE, VIEW_MESSAGE_BY_ID, LOCK/UNLOCK_BATCH_MQ, client
heartbeats) through a real broker: RocketMQ 4.9's response code and a remark saying what was wrong."""

import dataclasses

import pytest

from broker.common import fastjson
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.common.request_headers import PullMessageRequestHeader
from tests.server.refusals_broker import READ, WRITE, RefusalBroker, assert_refused

TOPIC = "ReadRefusals"
GROUP = "read-refusal-group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("refusals-read"), {"enablePropertyFilter": "false"})
    broker.create_topic(TOPIC, 2)
    broker.create_group(GROUP)
    yield broker
    broker.stop()


def pull(broker, topic=TOPIC, group=GROUP, queue_id=0, sys_flag=FLAG_SUBSCRIPTION, **fields):
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=sys_flag,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
        expression_type="TAG",
    )
    return broker.invoke(RC.PULL_MESSAGE, dataclasses.replace(header, **fields))


# -- PULL_MESSAGE ---------------------------------------------------------------------------------
def test_pull_from_a_broker_that_is_not_readable(broker):
    with broker.permission(WRITE):
        refused = pull(broker)
        assert_refused(refused, ResponseCode.NO_PERMISSION, "pulling message is forbidden", "the broker[")
    assert pull(broker).code == ResponseCode.PULL_NOT_FOUND  # readable again: an empty queue


def test_pull_for_an_unknown_group(broker):
    refused = pull(broker, group="no-such-group")
    assert_refused(
        refused,
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "subscription group [no-such-group] does not exist",
    )


def test_pull_for_a_group_that_may_not_consume(broker):
    broker.create_group("disabled-group", consumeEnable=False)
    refused = pull(broker, group="disabled-group")
    assert_refused(refused, ResponseCode.NO_PERMISSION, "subscription group no permission, disabled-group")


def test_pull_from_a_write_only_topic(broker):
    broker.create_topic("WriteOnlyTopic", 1, perm=WRITE)
    refused = pull(broker, topic="WriteOnlyTopic")
    assert_refused(
        refused, ResponseCode.NO_PERMISSION, "the topic[WriteOnlyTopic] pulling message is forbidden"
    )


@pytest.mark.parametrize("queue_id", [-1, 2])
def test_pull_from_a_queue_the_topic_does_not_have(broker, queue_id):
    refused = pull(broker, queue_id=queue_id)
    assert_refused(
        refused,
        ResponseCode.SYSTEM_ERROR,
        f"queueId[{queue_id}] is illegal",
        f"topic:[{TOPIC}]",
        "readQueueNums:[2]",
    )


def test_pull_without_a_subscription_from_a_group_never_heard_of(broker):
    # No subscription in the request and no heartbeat from the group: nothing to filter by.
    refused = pull(broker, sys_flag=0)
    assert_refused(
        refused, ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist", GROUP
    )


def test_pull_with_sql92_when_the_broker_does_not_filter_by_properties(broker):
    refused = pull(broker, expression_type="SQL92", subscription="a > 1")
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "does not support consumer to filter message by SQL92")


# -- VIEW_MESSAGE_BY_ID ---------------------------------------------------------------------------
def test_view_of_a_message_that_does_not_exist(broker):
    refused = broker.invoke(RC.VIEW_MESSAGE_BY_ID, {"offset": 1 << 40})
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {1 << 40}")


# -- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ --------------------------------------------------------------
MQ = {"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}


@pytest.mark.parametrize("code", [RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ])
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "the lock request body is malformed"),
        (
            fastjson.dumps({"clientId": "c1", "mqSet": [MQ]}),
            "malformed lock batch body: KeyError('consumerGroup')",
        ),
        (
            fastjson.dumps({"consumerGroup": GROUP, "clientId": "c1", "mqSet": [{"topic": TOPIC}]}),
            "'brokerName'",
        ),
        (
            fastjson.dumps({"consumerGroup": GROUP, "clientId": "", "mqSet": [MQ]}),
            "needs consumerGroup and clientId",
        ),
    ],
    ids=["not-json", "no-group", "queue-without-broker", "empty-client-id"],
)
def test_malformed_lock_requests(broker, code, body, reason):
    refused = broker.invoke(code, body=body)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, reason)


def test_a_well_formed_lock_request_is_granted(broker):
    body = fastjson.dumps({"consumerGroup": GROUP, "clientId": "c1", "mqSet": [MQ]})
    granted = broker.invoke(RC.LOCK_BATCH_MQ, body=body)
    assert granted.ok and fastjson.loads(granted.body)["lockOKMQSet"] == [MQ]


# -- clients --------------------------------------------------------------------------------------
def test_heartbeat_without_a_client_id(broker):
    refused = broker.invoke(
        RC.HEART_BEAT, body=fastjson.dumps({"consumerDataSet": [], "producerDataSet": []})
    )
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "the heartbeat has no clientID")


def test_heartbeat_with_a_sql92_subscription_the_broker_cannot_serve(broker):
    consumer = {
        "groupName": GROUP,
        "subscriptionDataSet": [{"topic": TOPIC, "subString": "a > 1", "expressionType": "SQL92"}],
    }
    body = fastjson.dumps({"clientID": "c-sql", "consumerDataSet": [consumer], "producerDataSet": []})
    refused = broker.invoke(RC.HEART_BEAT, body=body)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "SQL92")


def test_consumer_list_of_a_group_with_no_consumer(broker):
    refused = broker.invoke(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody-here"})
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "no consumer for this group, nobody-here")


def test_read_only_broker_still_serves_pulls(broker):
    with broker.permission(READ):
        assert pull(broker).code == ResponseCode.PULL_NOT_FOUND
