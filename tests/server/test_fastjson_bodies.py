"""Every JSON body the broker writes (and the routes the name server builds from its registration),
read raw off the wire from real processes with the real SDK producing and consuming, and held to
fastjson's rules as RocketMQ's broker writes them: no nulls, Integer/Long keys bare, the Java
classes' field names and types (tests/common/java_bodies.py)."""

from __future__ import annotations

import threading

import orjson
import pytest

from broker.cli import main as mqadmin
from broker.client import CONSUME_FROM_FIRST_OFFSET, ConsumeConcurrentlyStatus, Producer, PushConsumer
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.local_cluster import wait_until
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.cluster import SEMANTICS_CLUSTER as CLUSTER
from tests.common import java_bodies as java

TOPIC, GROUP, PRODUCER_GROUP, RAW_GROUP = "BodiesTopic", "bodies-group", "bodies-producer", "raw-group"
QUEUES, SENT = 2, 6
CONSUMER_RUNNING_INFO = java.Bean(
    "ConsumerRunningInfo",
    {
        "jstack": str,
        # ProcessQueueInfo's fields are the SDK's share of this body, not checked here.
        "mqTable": java.Map(java.MESSAGE_QUEUE, object),
        "properties": java.Map(str, str),
        "statusTable": java.Map(str, object),
        "subscriptionSet": java.ListOf(java.SUBSCRIPTION_DATA),
    },
    frozenset({"jstack"}),
)


class Traffic:
    """A producer, a tag-filtering push consumer that consumed everything, one delayed message."""

    def __init__(self, namesrv_addr: str) -> None:
        self.received: list = []
        self.lock = threading.Lock()
        self.producer = Producer(PRODUCER_GROUP, namesrv_addr, instance_name="bodies-p")
        self.consumer = PushConsumer(GROUP, namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET,
                                     instance_name="bodies-c", persist_interval_ms=200)  # fmt: skip
        self.consumer.subscribe(TOPIC, "TagA || TagB")
        self.consumer.register_message_listener(self._listener)
        self.sent: list = []

    def start(self) -> None:
        self.producer.start()
        self.consumer.start()
        for index in range(SENT):
            message = Message(TOPIC, f"body-{index}".encode())
            message.tags = "TagA"
            message.delay_time_level = 1 if index == 0 else 0
            self.sent.append(self.producer.send(message))

    def _listener(self, messages, context):
        with self.lock:
            self.received.extend(messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def consumed_all(self) -> bool:
        with self.lock:
            return len({m.body for m in self.received}) == SENT

    def stop(self) -> None:
        self.producer.shutdown()
        self.consumer.shutdown()


cluster = cluster_fixture(ONE_BROKER, {"messageDelayLevel": "1s 2s"}, topics={TOPIC: QUEUES})


@pytest.fixture(scope="module")
def traffic(cluster):
    traffic = Traffic(cluster.namesrv_addr)
    try:
        traffic.start()
        assert wait_until(traffic.consumed_all, timeout=30), "the consumer did not get every message"
        # Its offsets reach the broker with its next persist (every 200 ms).
        assert wait_until(lambda: _committed(cluster) == SENT, timeout=15)
        yield traffic
    finally:
        traffic.stop()


def _committed(cluster) -> int:
    stats = fastjson_loads(_ask(cluster, RC.GET_CONSUME_STATS, {"consumerGroup": GROUP}))
    return sum(wrapper["consumerOffset"] for wrapper in stats["offsetTable"].values())


def fastjson_loads(raw: bytes):
    from broker.common import fastjson

    return fastjson.loads(raw)


def _ask(cluster, code, fields=None, body=b"", addr=None, timeout_ms=5000):
    answer = cluster.admin.invoke(addr or cluster.broker_addr, create_request(code, fields, body), timeout_ms)
    assert answer.ok, f"{code}: {answer.code} {answer.remark}"
    return answer.body


def test_route_and_cluster_info_of_a_registered_broker(cluster):
    raw = _ask(cluster, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, addr=cluster.namesrv_addr)
    java.assert_fastjson_body(raw, java.with_optional(java.TOPIC_ROUTE_DATA, "orderTopicConf"))
    assert b"orderTopicConf" not in raw
    assert f'"brokerAddrs":{{0:"{cluster.broker_addr}"}}'.encode() in raw

    raw = _ask(cluster, RC.GET_BROKER_CLUSTER_INFO, addr=cluster.namesrv_addr)
    info = java.assert_fastjson_body(raw, java.CLUSTER_INFO)
    assert info["clusterAddrTable"] == {CLUSTER: ["broker-a"]}
    assert f'"brokerAddrs":{{0:"{cluster.broker_addr}"}}'.encode() in raw

    raw = _ask(cluster, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, addr=cluster.namesrv_addr)
    topics = java.assert_fastjson_body(raw, java.with_optional(java.TOPIC_LIST, "brokerAddr"))
    assert TOPIC in topics["topicList"]


def test_topic_and_subscription_group_configs(cluster, traffic):
    topics = java.assert_fastjson_body(_ask(cluster, RC.GET_ALL_TOPIC_CONFIG), java.TOPIC_CONFIG_WRAPPER)
    assert topics["topicConfigTable"][TOPIC]["order"] is False
    groups = java.assert_fastjson_body(
        _ask(cluster, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), java.SUBSCRIPTION_GROUP_WRAPPER
    )
    assert GROUP in groups["subscriptionGroupTable"]


def test_consumer_and_producer_connections(cluster, traffic):
    raw = _ask(cluster, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
    connection = java.assert_fastjson_body(raw, java.CONSUMER_CONNECTION)
    subscription = connection["subscriptionTable"][TOPIC]
    assert (subscription["subString"], subscription["tagsSet"]) == ("TagA || TagB", ["TagA", "TagB"])
    assert [c["language"] for c in connection["connectionSet"]] == ["PYTHON"]

    raw = _ask(cluster, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": PRODUCER_GROUP})
    assert len(java.assert_fastjson_body(raw, java.PRODUCER_CONNECTION)["connectionSet"]) == 1
    raw = _ask(cluster, RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
    assert len(java.assert_fastjson_body(raw, java.CONSUMER_LIST)["consumerIdList"]) == 1
    raw = _ask(cluster, RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert GROUP in java.assert_fastjson_body(raw, java.GROUP_LIST)["groupList"]


def test_a_heartbeat_subscription_is_written_back_as_subscription_data(cluster):
    """A client that leaves fields out (ali-ons sends no expressionType) or adds its own gets
    SubscriptionData's fields back, Java's defaults filled in, as RocketMQ's broker re-encodes it."""
    client = SyncRemotingClient()
    try:
        heartbeat = {
            "clientID": "127.0.0.1@raw",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": RAW_GROUP,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "topic": TOPIC,
                            "subString": "*",
                            "classFilterMode": False,
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": 1700000000000,
                            "filterClassSource": "class X {}",
                        }
                    ],
                }
            ],
        }
        sent = client.invoke(cluster.broker_addr, create_request(RC.HEART_BEAT, body=orjson.dumps(heartbeat)))
        assert sent.ok, sent.remark
        raw = _ask(cluster, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": RAW_GROUP})
        connection = java.assert_fastjson_body(raw, java.CONSUMER_CONNECTION)
        assert connection["subscriptionTable"][TOPIC] == {
            "classFilterMode": False,
            "codeSet": [],
            "expressionType": "TAG",
            "subString": "*",
            "subVersion": 1700000000000,
            "tagsSet": [],
            "topic": TOPIC,
        }
    finally:
        client.close()


def test_consume_stats_and_topic_stats(cluster, traffic):
    raw = _ask(cluster, RC.GET_CONSUME_STATS, {"consumerGroup": GROUP})
    stats = java.assert_fastjson_body(raw, java.CONSUME_STATS)
    queues = {dict(mq)["queueId"] for mq in stats["offsetTable"] if dict(mq)["topic"] == TOPIC}
    assert queues == set(range(QUEUES))  # and the group's retry queue
    assert b'"consumeTps":' in raw and b'{"brokerName":"broker-a","queueId":0,"topic":"BodiesTopic"}:{' in raw

    raw = _ask(cluster, RC.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
    table = java.assert_fastjson_body(raw, java.TOPIC_STATS_TABLE)
    assert sum(offset["maxOffset"] for offset in table["offsetTable"].values()) == SENT


def test_runtime_info_is_a_kv_table_of_strings(cluster):
    table = java.assert_fastjson_body(_ask(cluster, RC.GET_BROKER_RUNTIME_INFO), java.KV_TABLE)["table"]
    assert "brokerVersion" in table and "putTps" in table


def test_all_consumer_offsets_key_queue_ids_bare(cluster, traffic):
    raw = _ask(cluster, RC.GET_ALL_CONSUMER_OFFSET)
    offsets = java.assert_fastjson_body(raw, java.CONSUMER_OFFSET_WRAPPER)["offsetTable"]
    assert sum(offsets[f"{TOPIC}@{GROUP}"].values()) == SENT
    assert f'"{TOPIC}@{GROUP}":{{0:'.encode() in raw


def test_delay_offsets_key_levels_bare(cluster, traffic):
    # The delayed message was consumed, so level 1 has delivered it.
    raw = _ask(cluster, RC.GET_ALL_DELAY_OFFSET)
    offsets = java.assert_fastjson_body(raw, java.DELAY_OFFSET_WRAPPER)["offsetTable"]
    assert offsets["1"] == 1
    assert b'{"offsetTable":{1:1' in raw


def test_lock_answer_and_reset_offset_body(cluster):
    queues = [{"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in range(QUEUES)]
    lock = {"consumerGroup": RAW_GROUP, "clientId": "lock-client", "onlyThisBroker": True, "mqSet": queues}
    raw = _ask(cluster, RC.LOCK_BATCH_MQ, body=orjson.dumps(lock))
    assert len(java.assert_fastjson_body(raw, java.LOCK_BATCH_RESPONSE)["lockOKMQSet"]) == QUEUES

    fields = {"topic": TOPIC, "group": RAW_GROUP, "timestamp": -1, "isForce": True}
    raw = _ask(cluster, RC.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    assert len(java.assert_fastjson_body(raw, java.RESET_OFFSET_BODY)["offsetTable"]) == QUEUES


def test_consumer_running_info_and_direct_consumption_relayed_from_the_sdk(cluster, traffic):
    client_id = traffic.consumer.instance.client_id
    raw = _ask(cluster, RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": client_id},
               timeout_ms=15_000)  # fmt: skip
    info = java.assert_fastjson_body(raw, CONSUMER_RUNNING_INFO)
    assert info["properties"]["consumerGroup"] == GROUP

    direct = {"consumerGroup": GROUP, "clientId": client_id, "msgId": traffic.sent[-1].offset_msg_id}
    raw = _ask(cluster, RC.CONSUME_MESSAGE_DIRECTLY, direct, timeout_ms=15_000)
    # A successful consumption has no remark: Java's null field is left out, not written as null.
    shape = java.with_optional(java.CONSUME_MESSAGE_DIRECTLY_RESULT, "remark")
    result = java.assert_fastjson_body(raw, shape)
    assert result["consumeResult"] == "CR_SUCCESS" and "remark" not in result


# -- enum fields: names or ordinals, as fastjson reads them (issue 32 items 9, 10) ----------------


def _consumer_heartbeat(group: str, **enums) -> bytes:
    """A heartbeat of one consumer of TOPIC in ``group``, its enum fields as given."""
    subscription = {"topic": TOPIC, "subString": "*", "expressionType": "TAG", "tagsSet": [],
                    "codeSet": [], "subVersion": 1700000000000, "classFilterMode": False}  # fmt: skip
    consumer = {"groupName": group, **enums, "unitMode": False, "subscriptionDataSet": [subscription]}
    return orjson.dumps(
        {"clientID": f"127.0.0.1@{group}", "producerDataSet": [], "consumerDataSet": [consumer]}
    )


def _route_now(cluster, topic: str):
    """GET_ROUTEINFO_BY_TOPIC asked once (no waiting for a registration to come)."""
    return cluster.admin.invoke(
        cluster.namesrv_addr, create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    )


def _broker_topics(cluster) -> dict:
    return fastjson_loads(_ask(cluster, RC.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]


@pytest.mark.parametrize(
    "group, sent, names",
    [
        # What Apache's C++ client (and every binding of it) sends.
        ("ordinal-cpp", (1, 1, 0), ("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")),
        ("ordinal-pull", (0, 0, 4), ("CONSUME_ACTIVELY", "BROADCASTING", "CONSUME_FROM_FIRST_OFFSET")),
        # ConsumeFromWhere's deprecated members keep their places in the declaration.
        (
            "ordinal-old",
            (2, 1, 1),
            ("CONSUME_POP", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"),
        ),
        ("ordinal-time", (1, 1, 5), ("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_TIMESTAMP")),
        # fastjson matches a name case-insensitively too.
        (
            "ordinal-case",
            ("consume_passively", "clustering", "consume_from_first_offset"),
            ("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET"),
        ),
    ],
)
def test_a_heartbeat_with_enum_ordinals_is_read_as_fastjson_reads_it(cluster, capsys, group, sent, names):
    enums = dict(zip(("consumeType", "messageModel", "consumeFromWhere"), sent, strict=True))
    client = SyncRemotingClient()
    try:
        answer = client.invoke(
            cluster.broker_addr, create_request(RC.HEART_BEAT, body=_consumer_heartbeat(group, **enums))
        )
        assert answer.ok, answer.remark
        # A CLUSTERING group has its retry topic from its first heartbeat on, as RocketMQ.
        assert ("%RETRY%" + group in _broker_topics(cluster)) == (names[1] == "CLUSTERING")
        raw = _ask(cluster, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        connection = java.assert_fastjson_body(raw, java.CONSUMER_CONNECTION)
        assert (
            connection["consumeType"],
            connection["messageModel"],
            connection["consumeFromWhere"],
        ) == names
        assert mqadmin(["consumerConnection", "-n", cluster.namesrv_addr, "-g", group]) == 0
        printed = capsys.readouterr().out
        assert f"ConsumeType: {names[0]}\nMessageModel: {names[1]}\nConsumeFromWhere: {names[2]}" in printed
    finally:
        client.close()


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("messageModel", 3, "3"),
        ("consumeType", -1, "-1"),
        ("consumeFromWhere", 6, "6"),
        ("messageModel", True, "True"),
        ("consumeType", 1.0, "1.0"),
        ("consumeFromWhere", ["CONSUME_FROM_LAST_OFFSET"], "CONSUME_FROM_LAST_OFFSET"),
    ],
)
def test_an_enum_value_fastjson_cannot_read_refuses_the_heartbeat(cluster, field, value, said):
    group = "ordinal-refused"
    enums = {"consumeType": 1, "messageModel": 1, "consumeFromWhere": 0, field: value}
    client = SyncRemotingClient()
    try:
        answer = client.invoke(
            cluster.broker_addr, create_request(RC.HEART_BEAT, body=_consumer_heartbeat(group, **enums))
        )
        assert answer.code == ResponseCode.SYSTEM_ERROR, (answer.code, answer.remark)
        assert field in answer.remark and said in answer.remark, answer.remark
        # Nothing of the heartbeat was taken: no member, no retry topic.
        request = create_request(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        assert cluster.admin.invoke(cluster.broker_addr, request).code == ResponseCode.CONSUMER_NOT_ONLINE
        assert "%RETRY%" + group not in _broker_topics(cluster)
    finally:
        client.close()


def test_a_new_groups_retry_topic_is_routed_once_its_heartbeat_is_answered(cluster):
    """As RocketMQ: the broker registers the retry topic a heartbeat creates before it answers,
    so the group's clients find its route at once (not after the next periodic registration)."""
    group = "route-at-heartbeat"
    client = SyncRemotingClient()
    try:
        names = {"consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING"}
        heartbeat = _consumer_heartbeat(group, **names, consumeFromWhere="CONSUME_FROM_LAST_OFFSET")
        answer = client.invoke(cluster.broker_addr, create_request(RC.HEART_BEAT, body=heartbeat))
        assert answer.ok, answer.remark
        route = _route_now(cluster, "%RETRY%" + group)
        assert route.ok, f"{route.code} {route.remark}"
        assert fastjson_loads(route.body)["queueDatas"][0]["brokerName"] == "broker-a"
    finally:
        client.close()


@pytest.mark.parametrize("delay_level, prefix", [(0, "%RETRY%"), (-1, "%DLQ%")])
def test_a_topic_a_send_back_creates_is_routed_once_it_is_answered(cluster, traffic, delay_level, prefix):
    group = f"route-at-send-back{delay_level}"
    _, offset = decode_offset_msg_id(traffic.sent[1].offset_msg_id)
    back = {"offset": offset, "group": group, "delayLevel": delay_level, "originTopic": TOPIC}
    _ask(cluster, RC.CONSUMER_SEND_MSG_BACK, back)
    route = _route_now(cluster, prefix + group)
    assert route.ok, f"{route.code} {route.remark}"


def test_a_retry_topic_a_send_creates_is_routed_once_it_is_answered(cluster):
    """A client whose send-back failed sends the message to the retry topic itself (as Apache's
    DefaultMQPushConsumerImpl.sendMessageBack): the topic that send creates is registered at once."""
    group = "route-at-retry-send"  # created on first use (autoCreateSubscriptionGroup)
    fields = {"producerGroup": "CLIENT_INNER_PRODUCER", "topic": "%RETRY%" + group, "defaultTopic": "TBW102",
              "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 1, "flag": 0,
              "properties": "", "reconsumeTimes": 1}  # fmt: skip
    _ask(cluster, RC.SEND_MESSAGE, fields, b"retried by the client")
    route = _route_now(cluster, "%RETRY%" + group)
    assert route.ok, f"{route.code} {route.remark}"
