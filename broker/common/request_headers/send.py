"""Headers of the send requests (SEND_MESSAGE, its compact V2 form, batches and replies).

``SendMessageRequestHeaderV2`` is the compact form Java clients send with SEND_MESSAGE_V2
(single-letter names ``a``..``m``); ``decode_send_header`` accepts either form.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.common.request_headers.base import CommandHeader, _camel, absent, header, make_decoder, wire
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC


@header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE (324).

    The broker takes a send without most fields, as it always has: the ``absent`` values. A
    ``topicSysFlag`` (the sys flag of a topic the send creates) is read under its own name in
    either form of the header."""

    producer_group: str = absent("")
    topic: str = absent("")
    default_topic: str = absent(AUTO_CREATE_TOPIC_KEY_TOPIC)
    default_topic_queue_nums: int = absent(4)
    queue_id: int = absent(-1)  # any queue
    sys_flag: int = absent(0)
    born_timestamp: int = absent(0)
    flag: int = absent(0)
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None  # None: the group's retry max times
    topic_sys_flag: int | None = None


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


@header
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


_decode_send_v1 = make_decoder(SendMessageRequestHeader)
_decode_send_v2 = make_decoder(SendMessageRequestHeader, SEND_V1_TO_V2)


def decode_send_request(ext_fields: Mapping[str, str]) -> SendMessageRequestHeader:
    """The header of a send or reply request as the broker reads it: in the one-letter names of
    the V2 form when they are there (a ``b`` without a ``topic``) whatever the code, as RocketMQ's
    broker does, with the ``absent`` values for what the request leaves out."""
    if "b" in ext_fields and "topic" not in ext_fields:
        return _decode_send_v2(ext_fields)
    return _decode_send_v1(ext_fields)


@header
class SendMessageResponseHeader(CommandHeader):
    """``MSG_REGION`` and ``TRACE_ON`` are extra fields RocketMQ's broker adds to the header."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", default=None)
    trace_on: str | None = wire("TRACE_ON", default=None)


@header
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → requesting client: the reply's send header
    with where and when it was stored."""

    producer_group: str = absent("")  # left empty when the reply's sender gave none
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
