"""Messages as operators read them: RocketMQ's field names, times and hosts spelled out, body as text."""

from __future__ import annotations

from typing import Any

from broker.cli_commands.output import format_millis, render_pairs
from broker.client.admin import AdminMessage

_BLOCK_FIELDS = (
    ("OffsetID:", "offsetMsgId"),
    ("MsgId:", "msgId"),
    ("Topic:", "topic"),
    ("Tags:", "tags"),
    ("Keys:", "keys"),
    ("Queue ID:", "queueId"),
    ("Queue Offset:", "queueOffset"),
    ("CommitLog Offset:", "commitLogOffset"),
    ("Reconsume Times:", "reconsumeTimes"),
    ("Born Timestamp:", "bornTimestamp"),
    ("Store Timestamp:", "storeTimestamp"),
    ("Born Host:", "bornHost"),
    ("Store Host:", "storeHost"),
    ("System Flag:", "sysFlag"),
    ("Properties:", "properties"),
    ("Message Body:", "body"),
)


def message_block(view: dict[str, Any]) -> str:
    """One message as RocketMQ's queryMsgById prints it: a label per line."""
    pairs = []
    for label, key in _BLOCK_FIELDS:
        value = view.get(key)
        if key in ("bornTimestamp", "storeTimestamp"):
            value = format_millis(value)
        pairs.append((label, value))
    return render_pairs(pairs)


def describe_message(message: AdminMessage, broker_name: str | None = None) -> dict[str, Any]:
    """A message as a flat dict with RocketMQ's field names; the body as text when it is UTF-8."""
    try:
        body, encoding = message.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = message.body.hex(), "hex"
    view = {
        "msgId": message.msg_id,
        "offsetMsgId": message.offset_msg_id,
        "topic": message.topic,
        "tags": message.tags,
        "keys": " ".join(message.keys) or None,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "reconsumeTimes": message.reconsume_times,
        "bornTimestamp": message.born_timestamp,
        "storeTimestamp": message.store_timestamp,
        "bornHost": message.born_host,
        "storeHost": message.store_host,
        "sysFlag": message.sys_flag,
        "properties": dict(message.properties),
        "body": body,
        "bodyEncoding": encoding,
    }
    if broker_name is not None:
        view["brokerName"] = broker_name
    return view
