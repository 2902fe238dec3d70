"""RocketMQ's message-trace records and their text encoding (TraceDataEncoder's format), shared by
the client's trace hooks, the broker's trace writer and the trace query.

A trace message in ``RMQ_SYS_TRACE_TOPIC`` holds one or more records; a record is its fields
joined by CONTENT_SPLITOR (\\x01) and ended by FIELD_SPLITOR (\\x02). Its KEYS are the traced
messages' ids (and keys), so a message's trace is found with a query by key.

Record layouts (as RocketMQ 4.9 writes them):
- Pub:       type, timestamp, region, group, topic, msgId, tags, keys, storeHost, bodyLength,
             costTime, msgType, offsetMsgId, success, clientHost
- SubBefore: type, timestamp, region, group, requestId, msgId, retryTimes, keys, clientHost
- SubAfter:  type, requestId, msgId, costTime, success, keys, contextCode, timestamp, clientHost
The trailing clientHost (the client id) is what later RocketMQ versions append; 4.9 readers
ignore it, and records without it are read as well.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"

PUB, SUB_BEFORE, SUB_AFTER = "Pub", "SubBefore", "SubAfter"
TRACE_TYPES = (PUB, SUB_BEFORE, SUB_AFTER)

# MessageType ordinals and ConsumeReturnType ordinals of RocketMQ.
MSG_TYPE_NORMAL, MSG_TYPE_TRANS_HALF, MSG_TYPE_TRANS_COMMIT, MSG_TYPE_DELAY = 0, 1, 2, 3
CONTEXT_SUCCESS, CONTEXT_TIME_OUT, CONTEXT_EXCEPTION, CONTEXT_RETURN_NULL, CONTEXT_FAILED = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class TraceRecord:
    trace_type: str
    msg_id: str
    timestamp: int = 0
    region: str = ""
    group: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_time: int = 0
    msg_type: int = MSG_TYPE_NORMAL
    offset_msg_id: str = ""
    success: bool = True
    request_id: str = ""
    retry_times: int = 0
    context_code: int = CONTEXT_SUCCESS
    client_host: str = ""

    def encode(self) -> str:
        fields: tuple[object, ...]
        if self.trace_type == PUB:
            fields = (PUB, self.timestamp, self.region, self.group, self.topic, self.msg_id, self.tags,
                      self.keys, self.store_host, self.body_length, self.cost_time, self.msg_type,
                      self.offset_msg_id, _bool(self.success), self.client_host)  # fmt: skip
        elif self.trace_type == SUB_BEFORE:
            fields = (SUB_BEFORE, self.timestamp, self.region, self.group, self.request_id, self.msg_id,
                      self.retry_times, self.keys, self.client_host)  # fmt: skip
        elif self.trace_type == SUB_AFTER:
            fields = (SUB_AFTER, self.request_id, self.msg_id, self.cost_time, _bool(self.success),
                      self.keys, self.context_code, self.timestamp, self.client_host)  # fmt: skip
        else:
            raise ValueError(f"unknown trace type {self.trace_type!r}")
        return CONTENT_SPLITOR.join(str(f) for f in fields) + FIELD_SPLITOR

    def trans_keys(self) -> list[str]:
        """The index keys of the trace message carrying this record (RocketMQ's TransKey)."""
        return [k for k in (self.msg_id, self.keys) if k]


def _at(line: list[str], index: int) -> str:
    return line[index] if len(line) > index else ""


def _bool(value: bool) -> str:
    return "true" if value else "false"


def decode_records(text: str) -> list[TraceRecord]:
    """Every record of a trace message body; unknown or malformed records are skipped."""
    records = []
    for chunk in text.split(FIELD_SPLITOR):
        line = chunk.split(CONTENT_SPLITOR)
        try:
            record = _decode_line(line)
        except (IndexError, ValueError):
            continue
        if record is not None:
            records.append(record)
    return records


def _decode_line(line: list[str]) -> TraceRecord | None:
    kind = line[0]
    if kind == PUB:
        record = TraceRecord(PUB, line[5], int(line[1]), line[2], line[3], line[4], line[6], line[7],
                             line[8], int(line[9]), int(line[10]), int(line[11]))  # fmt: skip
        if len(line) == 13:
            return replace(record, success=line[12] == "true")
        return replace(record, offset_msg_id=line[12], success=line[13] == "true", client_host=_at(line, 14))
    if kind == SUB_BEFORE:
        return TraceRecord(
            SUB_BEFORE, line[5], int(line[1]), line[2], line[3], keys=line[7], request_id=line[4],
            retry_times=int(line[6]), client_host=_at(line, 8),
        )  # fmt: skip
    if kind == SUB_AFTER:
        return TraceRecord(
            SUB_AFTER, line[2], int(line[7]) if len(line) >= 8 else 0, keys=line[5],
            cost_time=int(line[3]), success=line[4] == "true", request_id=line[1],
            context_code=int(line[6]) if len(line) >= 7 else CONTEXT_SUCCESS, client_host=_at(line, 8),
        )  # fmt: skip
    return None
