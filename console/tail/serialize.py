"""What a browser receives for one tailed message (JSON-safe, body cut to a preview)."""

from __future__ import annotations

from broker.common.message import MessageExt

BODY_PREVIEW_CHARS = 1024


def message_event(message: MessageExt, broker_name: str) -> dict:
    text = message.body.decode("utf-8", errors="replace")
    return {
        "topic": message.topic,
        "broker": broker_name,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "msgId": message.client_msg_id,
        "offsetMsgId": message.msg_id,
        "tags": message.tags or "",
        "keys": message.keys,
        "bornTimestamp": message.born_timestamp,
        "storeTimestamp": message.store_timestamp,
        "bodySize": len(message.body),
        "body": text[:BODY_PREVIEW_CHARS],
        "truncated": len(text) > BODY_PREVIEW_CHARS,
        # All of them: SQL92 filters may name TAGS or KEYS as RocketMQ's do.
        "properties": dict(message.properties),
    }
