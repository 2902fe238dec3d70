"""Request and response headers of RocketMQ's remoting protocol, one dataclass per header.

A header travels as the ``extFields`` string map of a ``RemotingCommand``. Attributes are
snake_case; on the wire each one is named as RocketMQ's ``CommandCustomHeader`` field
(``consumer_group`` ↔ ``consumerGroup``), and a few irregular names (``clientID``,
``MSG_REGION``) are spelled out with ``wire()``. A field without a default is required, as
RocketMQ's ``@CFNotNull``; ``from_ext_fields`` refuses a header lacking one, or carrying a
number that does not parse, with :class:`HeaderError` naming the field, so a processor can
answer with a clear error instead of failing halfway.

``SendMessageRequestHeaderV2`` is the compact form Java clients send with SEND_MESSAGE_V2
(single-letter names ``a``..``m``); ``decode_send_header`` accepts either form.

Bodies that are small fixed JSON objects (lock/unlock batch) live here too, next to the
headers of the same requests. Heartbeats and the admin tables have their own modules.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

H = TypeVar("H", bound="CommandHeader")

_WIRE = "wire_name"


class HeaderError(ValueError):
    """A header that cannot be decoded: a required field missing or a number malformed."""


def wire(name: str, default=dataclasses.MISSING):
    """A field whose wire name is not the camelCase of its attribute."""
    if default is dataclasses.MISSING:
        return field(metadata={_WIRE: name})
    return field(default=default, metadata={_WIRE: name})


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    attr: str
    wire: str
    kind: type  # str, int or bool
    required: bool


def _kind_of(hint) -> type:
    # ``int | None`` → int: optional fields are typed as a union with None.
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base not in (str, int, bool):
        raise TypeError(f"unsupported header field type {hint!r}")
    return base


@functools.cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        name = f.metadata.get(_WIRE, _camel(f.name))
        specs.append(_FieldSpec(f.name, name, _kind_of(hints[f.name]), required))
    return tuple(specs)


def _parse(spec: _FieldSpec, raw: str):
    if spec.kind is str:
        return raw
    if spec.kind is bool:
        # Java's Boolean.parseBoolean: anything but a case-insensitive "true" is false.
        return raw.strip().lower() == "true"
    try:
        return int(raw.strip())
    except ValueError:
        raise HeaderError(f"the request header field {spec.wire!r}={raw!r} is not a number") from None


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class CommandHeader:
    """Base of every header: conversion to and from ``extFields``."""

    __slots__ = ()

    def to_ext_fields(self) -> dict[str, str]:
        out = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.wire] = _format(value)
        return out

    @classmethod
    def from_ext_fields(cls: type[H], ext_fields: dict[str, str] | None) -> H:
        ext_fields = ext_fields or {}
        values = {}
        for spec in _specs(cls):
            raw = ext_fields.get(spec.wire)
            if raw is None or (raw == "" and spec.kind is not str):
                if spec.required:
                    raise HeaderError(f"the request header lacks the field {spec.wire!r}")
                continue
            values[spec.attr] = _parse(spec, raw)
        return cls(**values)

    @classmethod
    def wire_names(cls) -> list[str]:
        return [spec.wire for spec in _specs(cls)]


# ---------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE (324)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None


# V2 letter → V1 attribute, in RocketMQ's order.
_V2_LETTERS = {
    "a": "producer_group",
    "b": "topic",
    "c": "default_topic",
    "d": "default_topic_queue_nums",
    "e": "queue_id",
    "f": "sys_flag",
    "g": "born_timestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsume_times",
    "k": "unit_mode",
    "l": "max_reconsume_times",
    "m": "batch",
}


# The same, by wire name: V2 letter → V1 field name, and back. A send's V2 header is its V1 header
# with these keys (what RocketMQ's Java client sends by default).
SEND_V2_TO_V1 = {letter: _camel(attr) for letter, attr in _V2_LETTERS.items()}
SEND_V1_TO_V2 = {name: letter for letter, name in SEND_V2_TO_V1.items()}


@dataclass(slots=True)
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310) and SEND_REPLY_MESSAGE_V2 (325): V1 with one-letter names."""

    a: str  # producerGroup
    b: str  # topic
    c: str  # defaultTopic
    d: int  # defaultTopicQueueNums
    e: int  # queueId
    f: int  # sysFlag
    g: int  # bornTimestamp
    h: int  # flag
    i: str | None = None  # properties
    j: int | None = None  # reconsumeTimes
    k: bool | None = None  # unitMode
    l: int | None = None  # maxReconsumeTimes  # noqa: E741 - RocketMQ's field name
    m: bool | None = None  # batch

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            **{attr: getattr(self, letter) for letter, attr in _V2_LETTERS.items()}
        )

    @classmethod
    def from_v1(cls, header: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(**{letter: getattr(header, attr) for letter, attr in _V2_LETTERS.items()})


SEND_V2_CODES = frozenset({310, 325})  # SEND_MESSAGE_V2, SEND_REPLY_MESSAGE_V2


def decode_send_header(code: int, ext_fields: dict[str, str]) -> SendMessageRequestHeader:
    """The V1 header of any send request, whichever form the client used."""
    if code in SEND_V2_CODES:
        return SendMessageRequestHeaderV2.from_ext_fields(ext_fields).to_v1()
    return SendMessageRequestHeader.from_ext_fields(ext_fields)


@dataclass(slots=True)
class SendMessageResponseHeader(CommandHeader):
    """``MSG_REGION`` and ``TRACE_ON`` are extra fields RocketMQ's broker adds to the header."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", None)
    trace_on: str | None = wire("TRACE_ON", None)


# ---------------------------------------------------------------------------------------------
# Pulling and offsets
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class PullMessageRequestHeader(CommandHeader):
    """PULL_MESSAGE (11); ``sys_flag`` bits are in :mod:`broker.common.sysflag` / PullSysFlag."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None


@dataclass(slots=True)
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: int


@dataclass(slots=True)
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int | None = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(slots=True)
class SearchOffsetRequestHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: int


@dataclass(slots=True)
class SearchOffsetResponseHeader(CommandHeader):
    offset: int


@dataclass(slots=True)
class GetMaxOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int


@dataclass(slots=True)
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int


@dataclass(slots=True)
class GetMinOffsetRequestHeader(CommandHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int


@dataclass(slots=True)
class GetMinOffsetResponseHeader(CommandHeader):
    offset: int


@dataclass(slots=True)
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int


@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int


@dataclass(slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and, broker → client, RESET_CONSUMER_CLIENT_OFFSET
    (220). ``timestamp`` -1 means the latest offset."""

    topic: str
    group: str
    timestamp: int
    is_force: bool = False


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314); without a topic every topic of the source group is copied."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


# ---------------------------------------------------------------------------------------------
# Querying messages
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12): by key (or unique msgId) within a store-time range."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(slots=True)
class ViewMessageRequestHeader(CommandHeader):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commit-log offset from an offsetMsgId."""

    offset: int


# ---------------------------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    """UNREGISTER_CLIENT (35)."""

    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38); the answer is a body ``{"consumerIdList": [...]}``."""

    consumer_group: str


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker → consumer, oneway."""

    consumer_group: str


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (36)."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37). ``commit_or_rollback`` is a MessageSysFlag transaction type."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39), broker → producer."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307), admin → broker → consumer."""

    consumer_group: str
    client_id: str
    jstack_enable: bool | None = None


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309), admin → broker → consumer."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) / GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    client_addr: str | None = None


# ---------------------------------------------------------------------------------------------
# Administration
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool = False
    topic_sys_flag: int | None = None


@dataclass(slots=True)
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215) and DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str


@dataclass(slots=True)
class GetTopicConfigRequestHeader(CommandHeader):
    """GET_TOPIC_CONFIG (351, RocketMQ 5 tools)."""

    topic: str


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    remove_offset: bool = False


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    """GET_CONSUME_STATS (208); without a topic, every topic the group consumes."""

    consumer_group: str
    topic: str | None = None


@dataclass(slots=True)
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@dataclass(slots=True)
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@dataclass(slots=True)
class QueryTopicsByConsumerRequestHeader(CommandHeader):
    """QUERY_TOPICS_BY_CONSUMER (343)."""

    group: str


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@dataclass(slots=True)
class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26): ``version`` is the DataVersion JSON."""

    version: str


# ---------------------------------------------------------------------------------------------
# Name server
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103); the body is a RegisterBrokerBody (topic configs, filter servers)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0


@dataclass(slots=True)
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class QueryDataVersionRequestHeader(CommandHeader):
    """QUERY_DATA_VERSION (322); the body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@dataclass(slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@dataclass(slots=True)
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int


@dataclass(slots=True)
class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@dataclass(slots=True)
class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@dataclass(slots=True)
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@dataclass(slots=True)
class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str


# ---------------------------------------------------------------------------------------------
# Bodies of LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42)
# ---------------------------------------------------------------------------------------------
def _mq_json(mq: dict) -> dict:
    # MessageQueue as fastjson writes it: properties in alphabetical order.
    return {"brokerName": mq["brokerName"], "queueId": int(mq["queueId"]), "topic": mq["topic"]}


@dataclass(slots=True)
class LockBatchRequestBody:
    consumer_group: str
    client_id: str
    mq_set: list[dict] = field(default_factory=list)  # MessageQueue JSON objects
    only_this_broker: bool = False

    def to_json_dict(self) -> dict:
        return {
            "consumerGroup": self.consumer_group,
            "clientId": self.client_id,
            "onlyThisBroker": self.only_this_broker,
            "mqSet": [_mq_json(mq) for mq in self.mq_set],
        }

    @classmethod
    def from_json_dict(cls, data: dict) -> LockBatchRequestBody:
        try:
            return cls(
                str(data["consumerGroup"]),
                str(data["clientId"]),
                [_mq_json(mq) for mq in data.get("mqSet") or []],
                bool(data.get("onlyThisBroker", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HeaderError(f"malformed lock batch body: {exc!r}") from None


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    pass


@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[dict] = field(default_factory=list)

    KEY: ClassVar[str] = "lockOKMQSet"

    def to_json_dict(self) -> dict:
        return {self.KEY: [_mq_json(mq) for mq in self.lock_ok_mq_set]}

    @classmethod
    def from_json_dict(cls, data: dict) -> LockBatchResponseBody:
        try:
            return cls([_mq_json(mq) for mq in data.get(cls.KEY) or []])
        except (KeyError, TypeError, ValueError) as exc:
            raise HeaderError(f"malformed lock batch response: {exc!r}") from None
