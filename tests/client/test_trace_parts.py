"""Trace records (RocketMQ's text format) and the dispatcher that must never hurt the application."""

import time

from broker.client.trace import AsyncTraceDispatcher
from broker.client.trace.dispatcher import MAX_TRACE_BODY, _pack
from broker.common.trace_data import PUB, SUB_AFTER, SUB_BEFORE, TraceRecord, decode_records
from broker.local_cluster import free_port


def test_records_round_trip_in_rocketmq_layout():
    records = [
        TraceRecord(
            PUB,
            "ID1",
            1000,
            "DefaultRegion",
            "pg",
            "T",
            "TagA",
            "k1",
            "1.2.3.4:10911",
            12,
            3,
            0,
            "OFFSETID",
            True,
        ),
        TraceRecord(
            SUB_BEFORE, "ID1", 1001, "DefaultRegion", "cg", keys="k1", request_id="R1", retry_times=2
        ),
        TraceRecord(
            SUB_AFTER, "ID1", 1002, keys="k1", cost_time=5, success=False, request_id="R1", context_code=4
        ),
    ]
    text = "".join(r.encode() for r in records)
    assert text.split("\x02")[0].split("\x01") == [
        "Pub", "1000", "DefaultRegion", "pg", "T", "ID1", "TagA", "k1", "1.2.3.4:10911", "12", "3", "0",
        "OFFSETID", "true", "",
    ]  # fmt: skip
    assert text.split("\x02")[2].split("\x01") == [
        "SubAfter",
        "R1",
        "ID1",
        "5",
        "false",
        "k1",
        "4",
        "1002",
        "",
    ]
    assert decode_records(text) == records


def test_decoding_skips_what_it_cannot_read():
    older_pub = "\x01".join(["Pub", "5", "r", "g", "T", "ID", "", "", "h", "1", "0", "0", "true"]) + "\x02"
    decoded = decode_records(older_pub + "Pub\x01broken\x02Unknown\x01x\x02")
    assert [(r.trace_type, r.msg_id, r.success) for r in decoded] == [(PUB, "ID", True)]


def test_records_are_packed_with_the_traced_ids_as_keys_and_bounded_bodies():
    big = [TraceRecord(PUB, f"ID{i}", keys=f"k{i}", tags="x" * 1000) for i in range(300)]
    packed = _pack(big)
    assert len(packed) > 1
    assert all(len(body) <= MAX_TRACE_BODY for body, _ in packed)
    assert sum(body.count("\x02") for body, _ in packed) == 300
    assert packed[0][1][:4] == ["ID0", "k0", "ID1", "k1"]


def test_a_full_buffer_drops_records_instead_of_blocking():
    dispatcher = AsyncTraceDispatcher("g", "127.0.0.1:1", buffer_size=2)  # not started: nothing drains
    started = time.monotonic()
    for i in range(5):
        dispatcher.append(TraceRecord(PUB, f"ID{i}"))
    assert dispatcher.dropped == 3
    assert time.monotonic() - started < 1


def test_failing_trace_sends_are_swallowed():
    # A real producer whose name server is not there: every trace send fails.
    dispatcher = AsyncTraceDispatcher("g", f"127.0.0.1:{free_port()}", flush_interval_ms=10).start()
    dispatcher.append(TraceRecord(PUB, "ID"))
    dispatcher.shutdown(timeout_s=10)
    assert dispatcher.sent_records == 0
