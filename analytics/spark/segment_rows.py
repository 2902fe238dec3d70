"""One archived commit-log segment → one row per stored record, with the store's own codec.

This module runs on Spark executors (shipped in the codec zip, see ``codec_zip``) and in the
plain-Python benchmark; it depends only on ``broker.common`` and the standard library.

A segment is a run of records starting at offset ``int(file name)``; it ends at a blank
end-of-segment record, at zero bytes (a segment that was still being written) or at a record
that runs past the end of the data (a torn tail). A torn tail yields one row of kind ``torn``
that says where the unreadable bytes start and how many there are, so reports can show it.
Unreadable bytes or zeros followed by sound records (damage the broker quarantined and nobody purged yet)
are one ``torn`` row too, and the rows go on at the next sound record (``next_record_start``, the
store's own resynchronisation).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from functools import lru_cache

from broker.common import message_const as const
from broker.common.hosts import format_host
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.segment_scan import TORN, resume_after, segment_end, segment_records
from broker.common.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    transaction_value,
)
from broker.common.topic_config import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_system_topic,
)

KIND_NORMAL = "normal"
KIND_RETRY = "retry"
KIND_DLQ = "dlq"
KIND_SCHEDULE = "schedule"
KIND_TRANS_HALF = "trans_half"
KIND_TRANS_OP = "trans_op"
KIND_TRANS_GIVEN_UP = "trans_given_up"
KIND_TRACE = "trace"
KIND_SYSTEM = "system"
KIND_TORN = "torn"

_TRANSACTION_STATES = {
    TRANSACTION_PREPARED_TYPE: "prepared",
    TRANSACTION_COMMIT_TYPE: "commit",
    TRANSACTION_ROLLBACK_TYPE: "rollback",
}

# Column order of every row; ``segment_dataframe.SCHEMA`` declares the same names and types.
COLUMNS = (
    "segment", "commitlog_offset", "kind", "topic", "queue_id", "queue_offset", "tags", "keys",
    "unique_key", "properties", "body_size", "store_size", "born_timestamp", "store_timestamp",
    "born_host", "store_host", "reconsume_times", "sys_flag", "transaction_state",
    "prepared_transaction_offset", "delay_level", "original_topic", "real_topic", "group",
    "op_offsets",
)  # fmt: skip


_SPECIAL_KINDS = {
    SCHEDULE_TOPIC: KIND_SCHEDULE,
    TRANS_HALF_TOPIC: KIND_TRANS_HALF,
    TRANS_OP_HALF_TOPIC: KIND_TRANS_OP,
    TRANS_CHECK_MAX_TIME_TOPIC: KIND_TRANS_GIVEN_UP,
    TRACE_TOPIC: KIND_TRACE,
}
# Kinds whose records belong to a consumer group (by topic or by the topic they are parked for).
_GROUP_KINDS = frozenset({KIND_RETRY, KIND_DLQ, KIND_SCHEDULE})


@lru_cache(maxsize=65536)  # a segment holds few topics and many records: classify each topic once
def topic_kind(topic: str) -> str:
    """What a record in ``topic`` is, for reports that must tell user traffic from the broker's."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return KIND_RETRY
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return KIND_DLQ
    special = _SPECIAL_KINDS.get(topic)
    if special:
        return special
    return KIND_SYSTEM if is_system_topic(topic) else KIND_NORMAL


def consumer_group(topic: str, properties: dict[str, str]) -> str | None:
    """The consumer group a retry, DLQ or scheduled-retry record belongs to."""
    for candidate in (topic, properties.get(const.PROPERTY_REAL_TOPIC) or ""):
        for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
            if candidate.startswith(prefix):
                return candidate[len(prefix) :]
    return None


def op_offsets(body: bytes) -> list[int]:
    """Half-queue offsets an op record removes: RocketMQ writes them as decimal text, one per
    record in 4.x and comma-separated in later versions. Anything else is not an offset."""
    offsets = []
    for token in body.decode("ascii", "replace").split(","):
        token = token.strip()
        if token.isdigit():
            offsets.append(int(token))
    return offsets


def record_row(segment: str, buf, pos: int) -> tuple:
    """The row of the record at ``pos`` (raises ``MessageDecodeError`` when it is malformed)."""
    msg = decode_message(buf, pos)
    topic = msg.topic
    kind = topic_kind(topic)
    props = msg.properties
    original = props.get(const.PROPERTY_RETRY_TOPIC) or props.get(const.PROPERTY_REAL_TOPIC)
    delay = props.get(const.PROPERTY_DELAY_TIME_LEVEL)
    return (
        segment, msg.commitlog_offset, kind, topic, msg.queue_id, msg.queue_offset,
        props.get(const.PROPERTY_TAGS), props.get(const.PROPERTY_KEYS),
        props.get(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), props, len(msg.body), msg.store_size,
        msg.born_timestamp, msg.store_timestamp, _host(msg.born_host), _host(msg.store_host),
        msg.reconsume_times, msg.sys_flag, _TRANSACTION_STATES.get(transaction_value(msg.sys_flag), "none"),
        msg.prepared_transaction_offset, int(delay) if delay and delay.isdigit() else None,
        original, props.get(const.PROPERTY_REAL_TOPIC),
        consumer_group(topic, props) if kind in _GROUP_KINDS else None,
        op_offsets(msg.body) if kind == KIND_TRANS_OP else None,
    )  # fmt: skip


# A segment holds records of few producers and one broker: format each host once.
_host = lru_cache(maxsize=4096)(format_host)


def segment_rows(segment: str, buf) -> Iterator[tuple]:
    """Every record of one segment as a row; see the module docstring for where it stops."""
    view = memoryview(buf)
    base = _segment_base_offset(segment)
    start = 0
    while True:
        end, clean = yield from _rows_from(segment, view, base, start)
        # Sound records after the bad bytes (or after zeros: a lost block, not the unwritten
        # rest) can only be recognised by their stored offsets.
        resume = resume_after(view, end, len(view), base) if base is not None else None
        if clean and resume is None:
            return
        yield torn_row(segment, (base or 0) + end, (len(view) if resume is None else resume) - end)
        if resume is None:
            return
        start = resume


def _rows_from(
    segment: str, view: memoryview, base: int | None, start: int
) -> Generator[tuple, None, tuple[int, bool]]:
    """Rows from ``start`` on; returns where they stopped and whether that may be a clean end
    (the end of the data, a blank end record or zeros with nothing sound after them)."""
    end = start
    for pos, size in segment_records(view, start):
        try:
            row = record_row(segment, view, pos)
        except MessageDecodeError:
            return end, False
        if base is not None and row[1] != base + pos:
            return end, False  # a record whose own offset disagrees with its place: garbage, not data
        yield row
        end = pos + size
    return end, segment_end(view, end) != TORN


def torn_row(segment: str, offset: int, length: int) -> tuple:
    row = dict.fromkeys(COLUMNS)
    row.update(segment=segment, commitlog_offset=offset, kind=KIND_TORN, topic="", body_size=length,
               store_size=length, properties={})  # fmt: skip
    return tuple(row[name] for name in COLUMNS)


def _segment_base_offset(segment: str) -> int | None:
    name = os.path.basename(segment.rstrip("/"))
    return int(name) if name.isdigit() else None


def decode_partition(files) -> Iterator[tuple]:
    """``mapPartitions`` body over ``binaryFiles`` pairs: rows of every segment file in them.

    Files whose names are not commit-log offsets (the archive manifest, ``.part`` copies still
    being written) are not segments and are skipped."""
    for path, content in files:
        name = os.path.basename(path.rstrip("/"))
        if name.isdigit():
            yield from segment_rows(name, content)
