"""A message's life as a timeline (W13), from the trace topic and the cluster's own records.

Trace records (``RMQ_SYS_TRACE_TOPIC``, B16) are RocketMQ trace contexts: fields separated by
\\x01, contexts by \\x02, the first field naming the kind (Pub, SubBefore, SubAfter,
EndTransaction). Trace messages are indexed by the traced message's id, so a key query finds
them. Around them the timeline adds what the cluster itself shows: the stored message (store
time, delay level), its copies in each consuming group's dead-letter topic, and the console's
own replays (audit records).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.client.admin import MQAdmin, MQAdminError, NotFoundError
from broker.common import message_const as mc
from broker.common.message import MessageExt
from broker.common.topic_config import TRACE_TOPIC, dlq_topic

CONTENT_SEPARATOR = "\x01"
CONTEXT_SEPARATOR = "\x02"


@dataclass(frozen=True)
class TraceEvent:
    timestamp: int
    kind: str  # sent, stored, delayed, consume-start, consumed, consume-failed, retry, dlq, replay, ...
    title: str
    group: str = ""
    detail: dict = field(default_factory=dict)
    ok: bool = True


def _int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def decode_trace_body(body: str) -> list[dict]:
    """Trace contexts in a trace message body → dicts with named fields (unknown kinds kept raw)."""
    contexts = []
    for chunk in body.split(CONTEXT_SEPARATOR):
        parts = chunk.split(CONTENT_SEPARATOR)
        if not parts or not parts[0].strip():
            continue
        kind = parts[0].strip()
        parts += [""] * 16
        if kind == "Pub":
            contexts.append(
                {
                    "kind": kind,
                    "timestamp": _int(parts[1]),
                    "region": parts[2],
                    "group": parts[3],
                    "topic": parts[4],
                    "msgId": parts[5],
                    "tags": parts[6],
                    "keys": parts[7],
                    "storeHost": parts[8],
                    "bodyLength": _int(parts[9]),
                    "costTime": _int(parts[10]),
                    "msgType": parts[11],
                    "offsetMsgId": parts[12],
                    "success": parts[13] != "false",
                }
            )
        elif kind == "SubBefore":
            contexts.append(
                {
                    "kind": kind,
                    "timestamp": _int(parts[1]),
                    "region": parts[2],
                    "group": parts[3],
                    "requestId": parts[4],
                    "msgId": parts[5],
                    "retryTimes": _int(parts[6]),
                    "keys": parts[7],
                }
            )
        elif kind == "SubAfter":
            contexts.append(
                {
                    "kind": kind,
                    "requestId": parts[1],
                    "msgId": parts[2],
                    "costTime": _int(parts[3]),
                    "success": parts[4] != "false",
                    "keys": parts[5],
                    "contextCode": parts[6],
                    "timestamp": _int(parts[7]),
                    "group": parts[8],
                }
            )
        elif kind == "EndTransaction":
            contexts.append(
                {
                    "kind": kind,
                    "timestamp": _int(parts[1]),
                    "region": parts[2],
                    "group": parts[3],
                    "topic": parts[4],
                    "msgId": parts[5],
                    "tags": parts[6],
                    "keys": parts[7],
                    "storeHost": parts[8],
                    "msgType": parts[9],
                    "transactionId": parts[10],
                    "transactionState": parts[11],
                    "fromTransactionCheck": parts[12] == "true",
                }
            )
        else:
            contexts.append({"kind": kind, "raw": parts[1:]})
    return contexts


def trace_contexts(admin: MQAdmin, msg_id: str) -> list[dict]:
    try:
        messages = admin.query_message_by_key(TRACE_TOPIC, msg_id, max_num=256)
    except NotFoundError:
        return []
    contexts = []
    for message in messages:
        for context in decode_trace_body(message.body.decode("utf-8", errors="replace")):
            if context.get("msgId") in (msg_id, None, ""):
                contexts.append(context)
    return contexts


def _events_from_contexts(contexts: list[dict]) -> list[TraceEvent]:
    events = []
    before = {c["requestId"]: c for c in contexts if c["kind"] == "SubBefore"}
    for c in contexts:
        if c["kind"] == "Pub":
            events.append(
                TraceEvent(
                    c["timestamp"],
                    "sent",
                    f"Sent by {c['group'] or 'a producer'}",
                    c["group"],
                    {"cost ms": c["costTime"], "store host": c["storeHost"], "type": c["msgType"]},
                    c["success"],
                )
            )
        elif c["kind"] == "SubBefore":
            kind = "retry" if c["retryTimes"] else "consume-start"
            title = f"Delivered to {c['group']}" + (f" (retry {c['retryTimes']})" if c["retryTimes"] else "")
            events.append(TraceEvent(c["timestamp"], kind, title, c["group"], {"request": c["requestId"]}))
        elif c["kind"] == "SubAfter":
            start = before.get(c["requestId"], {})
            group = c["group"] or start.get("group", "")
            at = c["timestamp"] or start.get("timestamp", 0) + c["costTime"]
            kind = "consumed" if c["success"] else "consume-failed"
            title = f"{'Consumed' if c['success'] else 'Consume failed'} in {group}"
            events.append(TraceEvent(at, kind, title, group, {"cost ms": c["costTime"]}, c["success"]))
        elif c["kind"] == "EndTransaction":
            events.append(
                TraceEvent(
                    c["timestamp"],
                    "transaction",
                    f"Transaction {c['transactionState']}",
                    c["group"],
                    {"from check": c["fromTransactionCheck"]},
                )
            )
    return events


def _events_from_message(message: MessageExt) -> list[TraceEvent]:
    events = [
        TraceEvent(
            message.store_timestamp,
            "stored",
            f"Stored in {message.topic}",
            detail={"queue": message.queue_id, "offset": message.queue_offset},
        )
    ]
    level = message.delay_time_level
    if level:
        events.append(TraceEvent(message.store_timestamp, "delayed", f"Delayed (level {level})"))
    return events


def _dead_letters(admin: MQAdmin, msg_id: str, groups: set[str]) -> list[TraceEvent]:
    events = []
    for group in sorted(groups):
        try:
            found = admin.query_message_by_unique_key(dlq_topic(group), msg_id)
        except MQAdminError:
            continue
        for m in found:
            events.append(
                TraceEvent(
                    m.store_timestamp,
                    "dlq",
                    f"Dead-lettered for {group}",
                    group,
                    {"reconsume times": m.reconsume_times, "DLQ offsetMsgId": m.msg_id},
                    ok=False,
                )
            )
    return events


def timeline(
    admin: MQAdmin,
    msg_id: str,
    message: MessageExt | None,
    replays: list[TraceEvent],
    groups: set[str] = frozenset(),
) -> list[TraceEvent]:
    contexts = trace_contexts(admin, msg_id)
    events = _events_from_contexts(contexts)
    if message is not None:
        events += _events_from_message(message)
        origin = message.get_property(mc.PROPERTY_ORIGIN_MESSAGE_ID)
        if origin:
            events.append(TraceEvent(message.born_timestamp, "replay", f"Copy of message {origin}"))
    consumer_groups = {e.group for e in events if e.kind in ("consumed", "consume-failed", "retry")}
    events += _dead_letters(admin, msg_id, consumer_groups | set(groups))
    events += replays
    events.sort(key=lambda e: (e.timestamp, e.kind))
    return events
