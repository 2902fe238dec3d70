"""A message's life as a timeline (W13), from the trace topic and the cluster's own records.

Trace records (``RMQ_SYS_TRACE_TOPIC``, B16) are read with the SDK's trace query (one decoder of
RocketMQ's trace format, ``broker.common.trace_data``). Around them the timeline adds what the
cluster itself shows: the stored message (store time, delay level), its copies in the dead-letter
topics of the groups that consumed it (when no trace record says so), and the console's own
replays (audit records).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from broker.client.admin import MQAdmin, MQClientError
from broker.client.trace.query import TraceEvent as RecordEvent
from broker.client.trace.query import query_message_trace
from broker.common import message_const as mc
from broker.common.message import MessageExt
from broker.common.topic_config import dlq_topic

_PHASE = {"sent": 0, "stored": 1, "delayed": 2, "consume-start": 3, "retry": 3, "consume-failed": 4,
          "consumed": 4, "sent-back": 5, "dlq": 6, "replay": 7}  # fmt: skip


@dataclass(frozen=True)
class TraceEvent:
    timestamp: int
    kind: str  # sent, stored, delayed, consume-start, retry, consumed, consume-failed, sent-back, dlq, replay
    title: str
    group: str = ""
    detail: dict = field(default_factory=dict)
    ok: bool = True


def _from_trace(event: RecordEvent) -> TraceEvent:
    r, group = event.record, event.group
    if event.event == "send":
        detail = {"cost ms": r.cost_time, "store host": r.store_host, "client": r.client_host}
        return TraceEvent(
            r.timestamp, "sent", f"Sent by {group or 'a producer'} to {r.topic}", group, detail, r.success
        )
    if event.event == "retry":
        return TraceEvent(
            r.timestamp, "sent-back", f"Sent back to {r.topic} for a later retry", group, {}, False
        )
    if event.event == "dlq":
        return TraceEvent(r.timestamp, "dlq", f"Dead-lettered to {r.topic}", group, {}, False)
    if event.event == "consume_before":
        kind = "retry" if r.retry_times else "consume-start"
        suffix = f" (retry {r.retry_times})" if r.retry_times else ""
        return TraceEvent(
            r.timestamp, kind, f"Delivered to {group}{suffix}", group, {"client": r.client_host}
        )
    kind = "consumed" if r.success else "consume-failed"
    title = f"{'Consumed' if r.success else 'Consume failed'} in {group}"
    return TraceEvent(r.timestamp, kind, title, group, {"cost ms": r.cost_time}, r.success)


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
        except MQClientError:
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
    groups: AbstractSet[str] = frozenset(),
) -> list[TraceEvent]:
    events = [_from_trace(e) for e in query_message_trace(admin, msg_id)]
    if message is not None:
        events += _events_from_message(message)
        origin = message.get_property(mc.PROPERTY_ORIGIN_MESSAGE_ID)
        if origin:
            events.append(TraceEvent(message.born_timestamp, "replay", f"Copy of message {origin}"))
    consumer_groups = {e.group for e in events if e.kind in ("consumed", "consume-failed", "retry")}
    traced_dlq = {e.group for e in events if e.kind == "dlq"}
    events += _dead_letters(admin, msg_id, (consumer_groups | set(groups)) - traced_dlq)
    events += replays
    sent_at = min((e.timestamp for e in events if e.kind == "sent"), default=0)

    def order(event: TraceEvent) -> tuple[int, int]:
        # Clocks of client and broker differ by a few ms, and ms ties are common: a message is
        # never shown stored before it was sent, nor a consume result before its delivery.
        at = max(event.timestamp, sent_at) if event.kind in ("stored", "delayed") else event.timestamp
        return at, _PHASE.get(event.kind, 9)

    events.sort(key=order)
    return events
