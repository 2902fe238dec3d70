"""Reading what the admin requests answer: RocketMQ's JSON bodies (fastjson dialect), stored
messages, offsetMsgIds, runtime figures; and the operator's timestamps."""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from broker.client.errors import MQClientError
from broker.common import fastjson
from broker.common.hosts import HostPort
from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, decode_intact_messages, decode_offset_msg_id
from broker.remoting.command import RemotingCommand

from .results import ClientConnection, ConsumerConnection, QueueConsumeProgress, Subscription

log = logging.getLogger(__name__)

_HUMAN_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"


def parse_timestamp(text: str) -> int:
    """``now``, milliseconds since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS`` → epoch ms
    (what resetOffsetByTime and queryMsgByKey accept)."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.datetime.strptime(value, _HUMAN_TIME_FORMAT)
    except ValueError:
        raise ValueError(
            f"bad timestamp {text!r}: use now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(moment.timestamp() * 1000)


def as_int(value: Any) -> int:
    """A number of an answer; absent or malformed counts as 0 (as RocketMQ's tools print it)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def runtime_figure(value: Any) -> float:
    """RocketMQ runtime figures like putTps are ``"12.5 11.0 10.2"`` (10 s, 1 min, 10 min)."""
    if value is None:
        return 0.0
    try:
        return float(str(value).split()[0])
    except (IndexError, ValueError):
        return 0.0


def json_body(response: RemotingCommand, source: str) -> dict[str, Any]:
    """The body as RocketMQ's JSON (fastjson dialect: object keys allowed); {} when empty.
    ``source`` names the server in the error ("broker 10.0.0.1:10911")."""
    if not response.body:
        return {}
    try:
        value = fastjson.loads(response.body)
    except ValueError as exc:
        raise MQClientError(f"{source} sent an unreadable body ({exc})") from None
    return value if isinstance(value, dict) else {}


def messages_of(body: bytes | None) -> list[MessageExt]:
    """The messages of a broker's answer, each checked against its body CRC: a damaged one is
    logged and left out, never shown as intact."""
    try:
        messages, damaged = decode_intact_messages(body or b"", decompress_body=True)
    except MessageDecodeError as exc:
        raise MQClientError(f"a broker sent messages that cannot be decoded ({exc})") from None
    for problem in damaged:
        log.error("a message a broker sent is damaged and was left out: %s", problem)
    return messages


def looks_like_offset_msg_id(msg_id: str) -> bool:
    try:
        decode_offset_msg_id(msg_id)
    except MessageDecodeError:
        return False
    return True


def store_host_of(offset_msg_id: str) -> tuple[HostPort, int]:
    """offsetMsgId → (store host (ip, port), commit-log offset)."""
    try:
        return decode_offset_msg_id(offset_msg_id)
    except MessageDecodeError as exc:
        raise MQClientError(f"{offset_msg_id!r} is not an offsetMsgId ({exc})") from None


def mq_table(table: Any) -> list[tuple[dict[str, Any], Any]]:
    """Entries of a fastjson map keyed by MessageQueue objects, as (queue fields, value)."""
    if not table:
        return []
    items = table.items() if isinstance(table, dict) else table
    return [(_mq_fields(key), value) for key, value in items]


def _mq_fields(key: Any) -> dict[str, Any]:
    if isinstance(key, dict):
        return key
    if isinstance(key, tuple | frozenset):
        return dict(key)
    if isinstance(key, str):
        parsed = fastjson.loads(key.encode("utf-8"))
        return parsed if isinstance(parsed, dict) else {}
    return {
        "topic": getattr(key, "topic", ""),
        "brokerName": getattr(key, "broker_name", ""),
        "queueId": getattr(key, "queue_id", 0),
    }


def progress_rows(table: Any, broker_name: str) -> list[QueueConsumeProgress]:
    """A ConsumeStats ``offsetTable`` as rows (lag never below 0)."""
    rows = []
    for mq, wrapper in mq_table(table):
        broker_offset = as_int(wrapper.get("brokerOffset"))
        consumer_offset = as_int(wrapper.get("consumerOffset"))
        rows.append(
            QueueConsumeProgress(
                topic=mq.get("topic", ""),
                broker_name=mq.get("brokerName", broker_name),
                queue_id=int(mq.get("queueId", 0)),
                broker_offset=broker_offset,
                consumer_offset=consumer_offset,
                diff=max(broker_offset - consumer_offset, 0),
                last_timestamp=as_int(wrapper.get("lastTimestamp")),
            )
        )
    return rows


def connections(raw: Any) -> list[ClientConnection]:
    conns = [
        ClientConnection(
            client_id=str(c.get("clientId", "")),
            client_addr=str(c.get("clientAddr", "")),
            language=str(c.get("language", "")),
            version=as_int(c.get("version")),
        )
        for c in raw or []
    ]
    return sorted(conns, key=lambda c: c.client_id)


def consumer_connection(group: str, raw: dict[str, Any]) -> ConsumerConnection:
    subs = [
        Subscription(
            topic=str(topic),
            sub_string=str(data.get("subString", "*")),
            expression_type=str(data.get("expressionType") or "TAG"),
        )
        for topic, data in sorted((raw.get("subscriptionTable") or {}).items())
    ]
    return ConsumerConnection(
        group=group,
        connections=connections(raw.get("connectionSet")),
        subscriptions=subs,
        consume_type=str(raw.get("consumeType", "")),
        message_model=str(raw.get("messageModel", "")),
        consume_from_where=str(raw.get("consumeFromWhere", "")),
    )
