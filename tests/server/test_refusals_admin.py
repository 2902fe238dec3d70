"""Every refusal of the admin request codes (mqadmin and the console) through a real broker:
RocketMQ 4.9's response code and a remark saying what was wrong."""

import pytest

from broker.common import fastjson
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import create_offset_msg_id, encode_host
from broker.local_cluster import wait_until
from tests.server.refusals_broker import RefusalBroker, assert_refused

TOPIC = "AdminRefusals"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = RefusalBroker(tmp_path_factory.mktemp("refusals-admin"))
    broker.create_topic(TOPIC, 2)
    yield broker
    broker.stop()


def create_topic(broker, topic, queues=4):
    fields = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
    return broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)


# -- topics ---------------------------------------------------------------------------------------
def test_create_topic_with_an_illegal_name(broker):
    assert_refused(
        create_topic(broker, "bad topic!"), ResponseCode.SYSTEM_ERROR, "'bad topic!'", "characters"
    )


@pytest.mark.parametrize("topic", ["TBW102", "SCHEDULE_TOPIC_XXXX"])
def test_create_topic_that_is_a_system_topic(broker, topic):
    refused = create_topic(broker, topic)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system topic")


def test_create_topic_without_queues(broker):
    assert_refused(
        create_topic(broker, "NoQueues", 0), ResponseCode.SYSTEM_ERROR, "queue numbers must be at least 1"
    )


@pytest.mark.parametrize("filter_type", ["ALL_TAGS", "multi_tag", "1"])
def test_create_topic_with_a_filter_type_rocketmq_does_not_declare(broker, filter_type):
    """A header's topicFilterType is read as Java's TopicFilterType.valueOf reads it: a member's
    exact name (a JSON body's ordinal is fastjson's, not the header's)."""
    fields = {"topic": "FilterTyped", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
              "topicFilterType": filter_type}  # fmt: skip
    refused = broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)
    assert_refused(
        refused, ResponseCode.SYSTEM_ERROR, f"topicFilterType '{filter_type}'", "SINGLE_TAG, MULTI_TAG"
    )
    topics = fastjson.loads(broker.invoke(RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert "FilterTyped" not in topics

    assert broker.invoke(RC.UPDATE_AND_CREATE_TOPIC, {**fields, "topicFilterType": "MULTI_TAG"}).ok
    topics = fastjson.loads(broker.invoke(RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert topics["FilterTyped"]["topicFilterType"] == "MULTI_TAG"
    assert broker.invoke(RC.DELETE_TOPIC_IN_BROKER, {"topic": "FilterTyped"}).ok


def test_delete_a_system_topic(broker):
    refused = broker.invoke(RC.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "the topic[SCHEDULE_TOPIC_XXXX] is a system topic")


@pytest.mark.parametrize(
    ("code", "fields"),
    [
        (RC.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"}),
        (RC.GET_CONSUME_STATS, {"consumerGroup": "any", "topic": "NoSuchTopic"}),
        (RC.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "NoSuchTopic", "group": "any", "timestamp": -1}),
    ],
    ids=["topic-stats", "consume-stats", "reset-offset"],
)
def test_admin_requests_about_a_topic_that_does_not_exist(broker, code, fields):
    assert_refused(broker.invoke(code, fields), ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")


# -- groups and clients ---------------------------------------------------------------------------
def test_consumer_connections_of_a_group_not_online(broker):
    refused = broker.invoke(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "offline-group"})
    assert_refused(refused, ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[offline-group] not online")


@pytest.mark.parametrize("code", [RC.GET_CONSUMER_RUNNING_INFO, RC.CONSUME_MESSAGE_DIRECTLY])
def test_asking_a_consumer_that_is_not_online(broker, code):
    refused = broker.invoke(code, {"consumerGroup": "offline-group", "clientId": "10.0.0.9@gone"})
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "The Consumer <10.0.0.9@gone> not online")


def test_consume_directly_a_message_that_does_not_exist(broker):
    # A consumer online on this very connection (heartbeat), asked to consume a missing message.
    consumer = {"groupName": "direct-group", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": []}  # fmt: skip
    body = fastjson.dumps({"clientID": "direct-client", "consumerDataSet": [consumer], "producerDataSet": []})
    assert broker.invoke(RC.HEART_BEAT, body=body).ok
    host, port = broker.addr.split(":")
    missing = create_offset_msg_id(encode_host((host, int(port))), 1 << 40)
    fields = {"consumerGroup": "direct-group", "clientId": "direct-client", "msgId": missing}
    refused = broker.invoke(RC.CONSUME_MESSAGE_DIRECTLY, fields)
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "the message does not exist")


# -- broker config --------------------------------------------------------------------------------
def test_update_broker_config_with_nothing_to_update(broker):
    refused = broker.invoke(RC.UPDATE_BROKER_CONFIG, body=b"# just a comment\n")
    assert_refused(refused, ResponseCode.SYSTEM_ERROR, "no key=value to update")


def test_update_broker_config_when_broker_conf_cannot_be_written(broker):
    blocker = broker.conf_path.with_name(broker.conf_path.name + ".tmp")
    blocker.mkdir()  # the atomic rewrite's temp file cannot be created: a real OSError, even as root
    try:
        refused = broker.invoke(RC.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        assert_refused(refused, ResponseCode.SYSTEM_ERROR, "cannot write broker.conf")
    finally:
        blocker.rmdir()
    assert broker.config_value("brokerPermission") == "6"  # nothing applied when nothing was kept


@pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        (b"brokerPermission=5\n", ResponseCode.SYSTEM_ERROR, "brokerPermission='5' is not valid"),
        (b"noSuchKey=1\n", ResponseCode.SYSTEM_ERROR, "unknown broker config key: noSuchKey"),
        (
            b"storePathRootDir=/elsewhere\n",
            ResponseCode.NO_PERMISSION,
            "cannot change storePathRootDir at run time",
        ),
    ],
    ids=["bad-value", "unknown-key", "fixed-key"],
)
def test_update_broker_config_refused(broker, body, code, reason):
    assert_refused(broker.invoke(RC.UPDATE_BROKER_CONFIG, body=body), code, reason)
    assert broker.config_value("brokerPermission") == "6"


# -- malformed headers ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "fields", "field"),
    [
        (RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "x1"}, "'queueId'='x1' is not a number"),
        (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": TOPIC, "queueId": "0"}, "'timestamp'"),
        (RC.QUERY_CONSUMER_OFFSET, {"topic": TOPIC, "queueId": "0"}, "'consumerGroup'"),
        (RC.CONSUMER_SEND_MSG_BACK, {"group": "g", "offset": "no"}, "'offset'='no' is not a number"),
        (RC.END_TRANSACTION, {"producerGroup": "pg"}, "'tranStateTableOffset'"),
        (RC.GET_EARLIEST_MSG_STORETIME, {"topic": TOPIC}, "'queueId'"),
    ],
    ids=["max-offset", "search-offset", "consumer-offset", "send-back", "end-transaction", "earliest-time"],
)
def test_a_malformed_header_is_answered_with_its_fault_and_no_traceback(broker, code, fields, field):
    # As RocketMQ answers a header its decoder rejects: SYSTEM_ERROR, the remark naming the field.
    # The fault is the client's, so the broker's log says it in a line, without a traceback.
    output = broker.cluster.broker.output
    logged = len(output)
    assert_refused(broker.invoke(code, fields), ResponseCode.SYSTEM_ERROR, field)
    # The log line naming the field (a traceback's last line) comes through the output pipe later.
    wait_until(lambda: field in "".join(output[logged:]), 15, what=f"a log line naming {field}")
    log = "".join(output[logged:])
    assert "Traceback" not in log and f"code {code}" in log, log
