"""Broker-side trace records: the broker itself notes that a message went to a retry or
dead-letter topic, in the trace topic, in RocketMQ's trace format.

Client hooks trace sends and consume attempts; only the broker sees a message moved to
``%RETRY%<group>`` or ``%DLQ%<group>``. The send-back path calls ``write_trace_record`` so that
event joins the message's trace: a Pub record into the retry/DLQ topic, keyed by the message's
client msgId (what ``queryMsgTraceById`` looks up). A failure is logged, never raised: tracing
must not fail the send-back.
"""

from __future__ import annotations

import logging
import time

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.message import MessageExt
from broker.common.message_id import create_unique_id
from broker.common.trace_data import MSG_TYPE_DELAY, MSG_TYPE_NORMAL, PUB, TraceRecord

log = logging.getLogger(__name__)

RETRY, DLQ = "retry", "dlq"
DEFAULT_REGION = "DefaultRegion"


def trace_record_for(message: MessageExt, kind: str, group: str, store_host: str) -> TraceRecord:
    """The record saying ``message`` (as the consumer saw it) went to ``group``'s retry or DLQ topic."""
    if kind not in (RETRY, DLQ):
        raise ValueError(f"the trace event kind must be {RETRY!r} or {DLQ!r}, not {kind!r}")
    properties = message.properties
    msg_id = message.unique_key or properties.get(const.PROPERTY_ORIGIN_MESSAGE_ID) or message.msg_id
    return TraceRecord(
        PUB,
        msg_id,
        timestamp=int(time.time() * 1000),
        region=properties.get(const.PROPERTY_MSG_REGION) or DEFAULT_REGION,
        group=group,
        topic=tc.retry_topic(group) if kind == RETRY else tc.dlq_topic(group),
        tags=properties.get(const.PROPERTY_TAGS, ""),
        keys=properties.get(const.PROPERTY_KEYS, ""),
        store_host=store_host,
        body_length=len(message.body),
        msg_type=MSG_TYPE_DELAY if kind == RETRY else MSG_TYPE_NORMAL,
        offset_msg_id=message.msg_id,
        success=True,
    )


async def write_trace_record(
    broker, message: MessageExt, kind: str, group: str, trace_topic: str | None = None
):
    """Append the retry/DLQ record of ``message`` to the trace topic; True when it was stored."""
    if message.properties.get(const.PROPERTY_TRACE_SWITCH) == "false":
        return False
    topic = trace_topic or tc.TRACE_TOPIC
    try:
        record = trace_record_for(message, kind, group, broker.config.broker_addr)
        if broker.topics.get(topic) is None:
            broker.topics.ensure(topic, 1, tc.PERM_READ | tc.PERM_WRITE)
            broker.register_soon()
        trace = MessageExt(
            topic,
            record.encode().encode("utf-8"),
            properties={
                const.PROPERTY_KEYS: const.KEY_SEPARATOR.join(record.trans_keys()),
                const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_unique_id(),
                const.PROPERTY_CLUSTER: broker.config.broker_cluster_name,
            },
            queue_id=0,
            born_timestamp=int(time.time() * 1000),
            born_host=(broker.config.broker_ip1, broker.config.listen_port),
        )
        result = await broker.store.put_messages_async([trace])
    except Exception:
        log.exception("writing the %s trace record of %s failed", kind, message.client_msg_id)
        return False
    if result.append is None:
        log.warning(
            "the %s trace record of %s was not stored: %s", kind, message.client_msg_id, result.status
        )
        return False
    return True
