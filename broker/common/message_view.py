"""The one human view of a message: RocketMQ's field names, hosts spelled out, body as text.

The CLI prints it, the console renders it and exports it, the live tail streams it.
"""

from __future__ import annotations

from typing import Any

from broker.common.hosts import format_host
from broker.common.message import MessageExt


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
        "born_host": format_host(message.born_host),
        "store_host": format_host(message.store_host),
        "sys_flag": message.sys_flag,
        "properties": dict(message.properties),
        "body": body,
        "body_encoding": encoding,
    }
    if broker_name is not None:
        view["broker_name"] = broker_name
    return view
