"""The broker's retry/DLQ trace records: stored in the trace topic, keyed by the client msgId,
and joining the message's client-side trace in time order."""

import asyncio
import time

import pytest

from broker.client.trace import trace_events
from broker.common.codes import RequestCode
from broker.common.message import MessageExt
from broker.common.message_codec import decode_messages
from broker.common.topic_config import TRACE_TOPIC
from broker.common.trace_data import PUB, SUB_AFTER, SUB_BEFORE, TraceRecord, decode_records
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request
from broker.server.config import BrokerConfig
from broker.server.controller import BrokerController
from broker.server.trace_writer import trace_record_for, write_trace_record


def _consumed_message():
    return MessageExt(
        "OrderTopic",
        b"payload",
        properties={"UNIQ_KEY": "C0A80001000000000000000000000001", "KEYS": "order-7", "TAGS": "TagA"},
        msg_id="7F00000100002A9F0000000000000123",
        reconsume_times=2,
    )


async def _run_writer(tmp_path):
    small_store = {"mappedFileSizeCommitLog": "1048576", "mappedFileSizeConsumeQueue": "6000",
                   "maxHashSlotNum": "1000", "maxIndexNum": "4000"}  # fmt: skip
    config = BrokerConfig.from_properties(
        {"storePathRootDir": str(tmp_path), "listenPort": "0", "brokerName": "broker-t", **small_store}
    )
    controller = BrokerController(config)
    port = await controller.start()
    client = RemotingClient()
    try:
        msg = _consumed_message()
        assert await write_trace_record(controller, msg, "retry", "g1")
        assert await write_trace_record(controller, msg, "dlq", "g1")
        assert controller.topics.get(TRACE_TOPIC) is not None
        query = {"topic": TRACE_TOPIC, "key": msg.unique_key, "maxNum": 32, "beginTimestamp": 0,
                 "endTimestamp": 2**63 - 1}  # fmt: skip
        deadline = time.monotonic() + 10
        while True:  # the index is built by the dispatcher right after the append
            response = await client.invoke(
                f"127.0.0.1:{port}", create_request(RequestCode.QUERY_MESSAGE, query)
            )
            found = decode_messages(response.body) if response.ok else []
            if len(found) >= 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        return [r for m in found for r in decode_records(m.body.decode())]
    finally:
        await client.close()
        await controller.stop()


def test_retry_and_dlq_records_are_stored_and_found_by_msg_id(tmp_path):
    records = asyncio.run(_run_writer(tmp_path))
    assert sorted((r.trace_type, r.topic, r.group) for r in records) == [
        (PUB, "%DLQ%g1", "g1"),
        (PUB, "%RETRY%g1", "g1"),
    ]
    assert {r.msg_id for r in records} == {"C0A80001000000000000000000000001"}
    assert {(r.offset_msg_id, r.keys, r.tags) for r in records} == {
        ("7F00000100002A9F0000000000000123", "order-7", "TagA")
    }


def test_broker_events_join_the_client_trace_in_time_order():
    msg = _consumed_message()
    retry = trace_record_for(msg, "retry", "g1", "127.0.0.1:10911")
    dlq = trace_record_for(msg, "dlq", "g1", "127.0.0.1:10911")
    mid = msg.unique_key
    sent = TraceRecord(PUB, mid, retry.timestamp - 30, group="pg", topic="OrderTopic")
    before = TraceRecord(SUB_BEFORE, mid, retry.timestamp - 20, group="g1", request_id="r1")
    after = TraceRecord(SUB_AFTER, mid, retry.timestamp - 10, success=False, request_id="r1")
    dlq = TraceRecord(**{**dlq.__dict__, "timestamp": retry.timestamp + 5})
    other = TraceRecord(PUB, "another-message", retry.timestamp, topic="OrderTopic")
    events = trace_events([dlq, retry, after, other, before, sent, sent], mid)
    assert [e.event for e in events] == ["send", "consume_before", "consume_after", "retry", "dlq"]
    assert events[2].group == "g1"  # SubAfter takes the group of its SubBefore


def test_unknown_kinds_are_refused_and_trace_off_messages_skipped(tmp_path):
    with pytest.raises(ValueError, match="retry"):
        trace_record_for(_consumed_message(), "lost", "g1", "h:1")
    untraced = _consumed_message()
    untraced.properties["TRACE_ON"] = "false"
    assert asyncio.run(write_trace_record(None, untraced, "retry", "g1")) is False
