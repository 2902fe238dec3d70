"""A message's trace: every trace record about one message id, in time order.

Trace messages are indexed by the traced message ids, so a query by key on the trace topic finds
them; SubAfter records carry no group, so each takes the group of the SubBefore record of the
same consume attempt (request id).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from broker.common import topic_config as tc
from broker.common.topic_config import TRACE_TOPIC
from broker.common.trace_data import PUB, SUB_AFTER, SUB_BEFORE, TraceRecord, decode_records

from ..admin import NotFoundError

# The event each record stands for, as shown to operators.
_EVENTS = {PUB: "send", SUB_BEFORE: "consume_before", SUB_AFTER: "consume_after"}
# Within one millisecond: a send, then a consume attempt's start and end, then the broker's
# retry / DLQ record that the failed attempt caused.
_ORDER = {"send": 0, "consume_before": 1, "consume_after": 2, "retry": 3, "dlq": 3}


@dataclass(frozen=True)
class TraceEvent:
    event: str  # send, retry, dlq, consume_before, consume_after
    record: TraceRecord
    group: str

    def to_json(self) -> dict:
        return {"event": self.event, "group": self.group, **asdict(self.record)}


def event_of(record: TraceRecord) -> str:
    """What a record means: a Pub into a retry or dead-letter topic is the broker's retry or DLQ."""
    if record.trace_type == PUB and tc.is_retry_topic(record.topic):
        return "retry"
    if record.trace_type == PUB and tc.is_dlq_topic(record.topic):
        return "dlq"
    return _EVENTS.get(record.trace_type, record.trace_type)


def trace_events(records: list[TraceRecord], msg_id: str) -> list[TraceEvent]:
    """The records of ``msg_id`` (duplicates removed), in time order."""
    mine = list(dict.fromkeys(r for r in records if r.msg_id == msg_id))
    groups = {r.request_id: r.group for r in mine if r.trace_type == SUB_BEFORE}
    events = [TraceEvent(event_of(r), r, r.group or groups.get(r.request_id, "")) for r in mine]
    return sorted(events, key=lambda e: (e.record.timestamp, _ORDER.get(e.event, 4)))


def query_message_trace(
    admin, msg_id: str, trace_topic: str | None = None, max_num: int = 64
) -> list[TraceEvent]:
    """The trace of ``msg_id`` (a client msgId), read through an ``MQAdmin``."""
    try:
        messages = admin.query_message_by_key(trace_topic or TRACE_TOPIC, msg_id, 0, 2**63 - 1, max_num)
    except NotFoundError:  # no trace topic yet: nothing was ever traced
        return []
    records: list[TraceRecord] = []
    for message in messages:
        records.extend(decode_records(message.body.decode("utf-8", errors="replace")))
    return trace_events(records, msg_id)
