"""Messages as operators read them: RocketMQ's field names, times and hosts spelled out, body as text."""

from __future__ import annotations

from typing import Any

from broker.cli_commands.output import format_millis, render_pairs
from broker.common.message import MessageExt

_BLOCK_FIELDS = (
    ("OffsetID:", "offset_msg_id"),
    ("MsgId:", "msg_id"),
    ("Topic:", "topic"),
    ("Tags:", "tags"),
    ("Keys:", "keys"),
    ("Queue ID:", "queue_id"),
    ("Queue Offset:", "queue_offset"),
    ("CommitLog Offset:", "commit_log_offset"),
    ("Reconsume Times:", "reconsume_times"),
    ("Born Timestamp:", "born_timestamp"),
    ("Store Timestamp:", "store_timestamp"),
    ("Born Host:", "born_host"),
    ("Store Host:", "store_host"),
    ("System Flag:", "sys_flag"),
    ("Properties:", "properties"),
    ("Message Body:", "body"),
)


def message_block(view: dict[str, Any]) -> str:
    """One message as RocketMQ's queryMsgById prints it: a label per line."""
    pairs = []
    for label, key in _BLOCK_FIELDS:
        value = view.get(key)
        if key in ("born_timestamp", "store_timestamp"):
            value = format_millis(value)
        pairs.append((label, value))
    return render_pairs(pairs)


def describe_message(message: MessageExt, broker_name: str | None = None) -> dict[str, Any]:
    """A message as a flat dict with RocketMQ's field names; the body as text when it is UTF-8."""
    try:
        body, encoding = message.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = message.body.hex(), "hex"
    view = {
        "msg_id": message.client_msg_id,
        "offset_msg_id": message.offset_msg_id,
        "topic": message.topic,
        "tags": message.tags,
        "keys": " ".join(message.keys) or None,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "commit_log_offset": message.commitlog_offset,
        "reconsume_times": message.reconsume_times,
        "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp,
        "born_host": _host(message.born_host),
        "store_host": _host(message.store_host),
        "sys_flag": message.sys_flag,
        "properties": dict(message.properties),
        "body": body,
        "body_encoding": encoding,
    }
    if broker_name is not None:
        view["broker_name"] = broker_name
    return view


def _host(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
