"""The JSON bodies of RocketMQ 4.9 as its Java classes define them, and checks of raw bodies
against them (fastjson's rules: no nulls, Integer/Long keys bare, the classes' field names).

A ``Bean`` lists a class's serialized fields (its getters, as fastjson finds them) and their types;
``optional`` names the fields that are null in the case at hand and so absent from the body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from broker.common import fastjson


@dataclass(frozen=True)
class Bean:
    name: str
    fields: dict[str, Any]
    optional: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Map:
    """A Java map: ``key`` is str, int (Integer/Long keys, written bare) or a Bean (object keys)."""

    key: Any
    value: Any


@dataclass(frozen=True)
class ListOf:
    item: Any


def with_optional(bean: Bean, *names: str) -> Bean:
    return Bean(bean.name, bean.fields, frozenset(names))


QUEUE_DATA = Bean(
    "QueueData",
    {"brokerName": str, "perm": int, "readQueueNums": int, "topicSysFlag": int, "writeQueueNums": int},
)
BROKER_DATA = Bean("BrokerData", {"brokerAddrs": Map(int, str), "brokerName": str, "cluster": str})
TOPIC_ROUTE_DATA = Bean(
    "TopicRouteData",
    {
        "brokerDatas": ListOf(BROKER_DATA),
        "filterServerTable": Map(str, ListOf(str)),
        "orderTopicConf": str,
        "queueDatas": ListOf(QUEUE_DATA),
    },
)
CLUSTER_INFO = Bean(
    "ClusterInfo", {"brokerAddrTable": Map(str, BROKER_DATA), "clusterAddrTable": Map(str, ListOf(str))}
)
TOPIC_LIST = Bean("TopicList", {"brokerAddr": str, "topicList": ListOf(str)})
KV_TABLE = Bean("KVTable", {"table": Map(str, str)})
DATA_VERSION = Bean("DataVersion", {"counter": int, "timestamp": int})
TOPIC_CONFIG = Bean(
    "TopicConfig",
    {
        "order": bool,
        "perm": int,
        "readQueueNums": int,
        "topicFilterType": str,
        "topicName": str,
        "topicSysFlag": int,
        "writeQueueNums": int,
    },
)
TOPIC_CONFIG_WRAPPER = Bean(
    "TopicConfigSerializeWrapper", {"dataVersion": DATA_VERSION, "topicConfigTable": Map(str, TOPIC_CONFIG)}
)
SUBSCRIPTION_GROUP_CONFIG = Bean(
    "SubscriptionGroupConfig",
    {
        "brokerId": int,
        "consumeBroadcastEnable": bool,
        "consumeEnable": bool,
        "consumeFromMinEnable": bool,
        "groupName": str,
        "notifyConsumerIdsChangedEnable": bool,
        "retryMaxTimes": int,
        "retryQueueNums": int,
        "whichBrokerWhenConsumeSlowly": int,
    },
)
SUBSCRIPTION_GROUP_WRAPPER = Bean(
    "SubscriptionGroupWrapper",
    {"dataVersion": DATA_VERSION, "subscriptionGroupTable": Map(str, SUBSCRIPTION_GROUP_CONFIG)},
)
MESSAGE_QUEUE = Bean("MessageQueue", {"brokerName": str, "queueId": int, "topic": str})
OFFSET_WRAPPER = Bean("OffsetWrapper", {"brokerOffset": int, "consumerOffset": int, "lastTimestamp": int})
CONSUME_STATS = Bean("ConsumeStats", {"consumeTps": float, "offsetTable": Map(MESSAGE_QUEUE, OFFSET_WRAPPER)})
TOPIC_OFFSET = Bean("TopicOffset", {"lastUpdateTimestamp": int, "maxOffset": int, "minOffset": int})
TOPIC_STATS_TABLE = Bean("TopicStatsTable", {"offsetTable": Map(MESSAGE_QUEUE, TOPIC_OFFSET)})
CONNECTION = Bean("Connection", {"clientAddr": str, "clientId": str, "language": str, "version": int})
SUBSCRIPTION_DATA = Bean(
    "SubscriptionData",
    {
        "classFilterMode": bool,
        "codeSet": ListOf(int),
        "expressionType": str,
        "subString": str,
        "subVersion": int,
        "tagsSet": ListOf(str),
        "topic": str,
    },
)
CONSUMER_CONNECTION = Bean(
    "ConsumerConnection",
    {
        "connectionSet": ListOf(CONNECTION),
        "consumeFromWhere": str,
        "consumeType": str,
        "messageModel": str,
        "subscriptionTable": Map(str, SUBSCRIPTION_DATA),
    },
)
PRODUCER_CONNECTION = Bean("ProducerConnection", {"connectionSet": ListOf(CONNECTION)})
GROUP_LIST = Bean("GroupList", {"groupList": ListOf(str)})
CONSUMER_LIST = Bean("GetConsumerListByGroupResponseBody", {"consumerIdList": ListOf(str)})
CONSUMER_OFFSET_WRAPPER = Bean("ConsumerOffsetSerializeWrapper", {"offsetTable": Map(str, Map(int, int))})
DELAY_OFFSET_WRAPPER = Bean("DelayOffsetSerializeWrapper", {"offsetTable": Map(int, int)})
LOCK_BATCH_RESPONSE = Bean("LockBatchResponseBody", {"lockOKMQSet": ListOf(MESSAGE_QUEUE)})
RESET_OFFSET_BODY = Bean("ResetOffsetBody", {"offsetTable": Map(MESSAGE_QUEUE, int)})
CONSUME_MESSAGE_DIRECTLY_RESULT = Bean(
    "ConsumeMessageDirectlyResult",
    {"autoCommit": bool, "consumeResult": str, "order": bool, "remark": str, "spentTimeMills": int},
)

_QUOTED_NUMBER_KEY = re.compile(rb'[{,]"-?\d+":')


def assert_fastjson_body(raw: bytes, shape: Bean) -> Any:
    """Check a raw body against ``shape`` and fastjson's rules; return it decoded."""
    assert raw, f"{shape.name}: empty body"
    assert b"null" not in raw, f"{shape.name} body has a null: {raw[:500]!r}"
    # Every Integer/Long key is written bare; no body here has a String key made of digits.
    assert not _QUOTED_NUMBER_KEY.search(raw), f"{shape.name} body has a quoted number key: {raw[:500]!r}"
    decoded = fastjson.loads(raw)
    _check(decoded, shape, shape.name)
    return decoded


def _check(value: Any, shape: Any, path: str) -> None:
    if isinstance(shape, Bean):
        assert isinstance(value, dict | tuple), f"{path}: {shape.name} expected, got {value!r}"
        fields = dict(value)
        required = set(shape.fields) - shape.optional
        assert required <= set(fields) <= set(shape.fields), (
            f"{path}: {shape.name} fields {sorted(fields)}, Java writes {sorted(required)}"
            + (f" (+ optional {sorted(shape.optional)})" if shape.optional else "")
        )
        for name, item in fields.items():
            _check(item, shape.fields[name], f"{path}.{name}")
    elif isinstance(shape, Map):
        assert isinstance(value, dict), f"{path}: a map expected, got {value!r}"
        for key, item in value.items():
            _check_key(key, shape.key, path)
            _check(item, shape.value, f"{path}[{key!r}]")
    elif isinstance(shape, ListOf):
        assert isinstance(value, list), f"{path}: a list expected, got {value!r}"
        for index, item in enumerate(value):
            _check(item, shape.item, f"{path}[{index}]")
    elif shape is float:
        assert isinstance(value, float), f"{path}: a Java double (with a point) expected, got {value!r}"
    elif shape is int:
        assert type(value) is int, f"{path}: a whole number expected, got {value!r}"
    else:
        assert isinstance(value, shape), f"{path}: {shape.__name__} expected, got {value!r}"


def _check_key(key: Any, kind: Any, path: str) -> None:
    if isinstance(kind, Bean):
        _check(key, kind, f"{path} key")
    elif kind is int:
        # loads gives Integer/Long keys back as digit strings (bare in the raw body, checked above).
        assert re.fullmatch(r"-?\d+", str(key)), f"{path}: a number key expected, got {key!r}"
    else:
        assert isinstance(key, str), f"{path}: a string key expected, got {key!r}"
