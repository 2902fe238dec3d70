"""Issue 32 item 6: a report over a real broker's archive agrees with the broker and with itself.

Known traffic through a real broker: normal messages on two topics, delayed messages at given
levels (one parked for an hour, still waiting when the report runs), and a push consumer of group
``billing`` that fails some ``orders`` messages — three on every attempt (two retries, then the
dead-letter queue) and two once with a one-hour delay level (parked, never redelivered before the
report). The broker stops, its segments are archived, the real Spark job reads them, and every
section must equal these counts (also as the broker's own queue offsets tell them) and agree with
the other sections.
"""

from __future__ import annotations

import threading

import pytest

from analytics.spark.job import ReportRequest, run_report
from broker.common import message_const as const
from broker.common.message import Message
from broker.common.topic_config import SCHEDULE_TOPIC, dlq_topic, retry_topic
from broker.local_cluster import wait_until
from broker.store.archive import SegmentArchiver
from tests.cluster import ONE_BROKER, start

GROUP = "billing"
ORDERS, AUDIT = "orders", "audit"
N_ORDERS, N_AUDIT = 20, 10
ALWAYS_FAIL = {"o-0", "o-1", "o-2"}  # two retries each (max reconsume 2), then the DLQ
FAIL_ONCE = {"o-3", "o-4"}  # sent back once at level 6 (1 h): parked when the report runs
PARK_LEVEL = 6
DELAYED = {1: 3, 2: 2, PARK_LEVEL: 1}  # user messages on AUDIT per delay level
# Levels 1-5 deliver in a second; level 6 holds what it parks past the report.
DELAY_LEVELS = "1s 1s 1s 1s 1s 1h"
MAX_RECONSUME = 2

RETRIES = len(ALWAYS_FAIL) * MAX_RECONSUME + len(FAIL_ONCE)  # send-backs asking for redelivery
REDELIVERED = len(ALWAYS_FAIL) * MAX_RECONSUME  # the parked ones have not come back yet
DEAD = len(ALWAYS_FAIL)
DELIVERED_DELAYED = sum(n for level, n in DELAYED.items() if level != PARK_LEVEL)
USER = {ORDERS: N_ORDERS, AUDIT: N_AUDIT + DELIVERED_DELAYED}


def _send_traffic(namesrv_addr: str) -> None:
    from broker.client import Producer

    producer = Producer("ENGINE_REPORT_PRODUCER", namesrv_addr).start()
    try:
        for i in range(N_ORDERS):
            msg = Message(ORDERS, b"order %03d" % i)
            msg.keys, msg.tags = f"o-{i}", "TagO"
            producer.send(msg)
        for i in range(N_AUDIT):
            msg = Message(AUDIT, b"audit entry %03d" % i)
            msg.keys, msg.tags = f"a-{i}", "TagA"
            producer.send(msg)
        for level, count in DELAYED.items():
            for i in range(count):
                msg = Message(AUDIT, b"delayed %d-%d" % (level, i))
                msg.keys, msg.tags = f"d{level}-{i}", "TagD"
                msg.put_property(const.PROPERTY_DELAY_TIME_LEVEL, str(level))
                producer.send(msg)
    finally:
        producer.shutdown()


def _failing_listener(seen: set[str], lock: threading.Lock):
    from broker.client import ConsumeConcurrentlyStatus

    def listener(msgs, context):
        key = msgs[0].keys[0]
        if key in ALWAYS_FAIL:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        if key in FAIL_ONCE and msgs[0].reconsume_times == 0:
            context["delay_level_when_next_consume"] = PARK_LEVEL
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        with lock:
            seen.add(key)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


def _consume_with_failures(cluster) -> None:
    seen: set[str] = set()
    consumer = cluster.push_consumer(
        GROUP, ORDERS, _failing_listener(seen, threading.Lock()), "engine-report",
        max_reconsume_times=MAX_RECONSUME,
    )  # fmt: skip
    succeeding = {f"o-{i}" for i in range(N_ORDERS)} - ALWAYS_FAIL - FAIL_ONCE
    try:

        def settled() -> bool:
            return (
                seen >= succeeding
                and cluster.max_offsets(dlq_topic(GROUP), 1) >= DEAD
                and cluster.max_offsets(retry_topic(GROUP), 1) >= REDELIVERED
            )

        wait_until(settled, timeout=90, what="the retries and dead letters of billing")
    finally:
        consumer.shutdown()


def _engine_counts(cluster) -> dict[str, int]:
    """What the broker itself says it stored, per topic (its queues' max offsets)."""
    wait_until(lambda: cluster.max_offsets(AUDIT, 4) >= USER[AUDIT], timeout=30, what="delayed delivery")
    return {
        ORDERS: cluster.max_offsets(ORDERS, 4),
        AUDIT: cluster.max_offsets(AUDIT, 4),
        SCHEDULE_TOPIC: cluster.max_offsets(SCHEDULE_TOPIC, len(DELAY_LEVELS.split())),
        retry_topic(GROUP): cluster.max_offsets(retry_topic(GROUP), 1),
        dlq_topic(GROUP): cluster.max_offsets(dlq_topic(GROUP), 1),
    }


@pytest.fixture(scope="module")
def engine_report(tmp_path_factory, spark):
    workdir = tmp_path_factory.mktemp("engine-report")
    cluster = start(ONE_BROKER, workdir, {"messageDelayLevel": DELAY_LEVELS})
    try:
        cluster.create_topic(ORDERS, 4)
        cluster.create_topic(AUDIT, 4)
        _send_traffic(cluster.namesrv_addr)
        _consume_with_failures(cluster)
        engine = _engine_counts(cluster)
    finally:
        cluster.stop()
    # The broker has stopped: archive every segment, the one it was writing included.
    archiver = SegmentArchiver(str(workdir / "archive"))
    for segment in sorted((workdir / "store" / "commitlog").iterdir()):
        archiver.archive(segment)
    request = ReportRequest("all", str(workdir / "archive"), str(workdir / "reports"))
    return run_report(spark, request).sections, engine


def test_the_broker_stored_the_known_traffic(engine_report):
    _, engine = engine_report
    assert engine == {
        ORDERS: N_ORDERS,
        AUDIT: USER[AUDIT],
        SCHEDULE_TOPIC: sum(DELAYED.values()) + RETRIES,
        retry_topic(GROUP): REDELIVERED,
        dlq_topic(GROUP): DEAD,
    }


def test_inputs_and_throughput_equal_what_the_broker_stored(engine_report):
    sections, engine = engine_report
    kinds = {r["kind"]: r["records"] for r in sections["inputs"]}
    assert kinds == {
        "normal": engine[ORDERS] + engine[AUDIT],
        "schedule": engine[SCHEDULE_TOPIC],
        "retry": engine[retry_topic(GROUP)],
        "dlq": engine[dlq_topic(GROUP)],
    }
    per_topic: dict[str, int] = {}
    for row in sections["throughput"]:
        per_topic[row["topic"]] = per_topic.get(row["topic"], 0) + row["messages"]
    assert per_topic == engine


def test_retries_and_dead_letters_count_every_send_back(engine_report):
    sections, _ = engine_report
    assert sections["retry_dlq"] == [
        {
            "group": GROUP,
            "source_topics": ORDERS,
            "source_messages": N_ORDERS,
            "retry_messages": RETRIES,
            "redelivered_messages": REDELIVERED,
            "retried_messages": len(ALWAYS_FAIL | FAIL_ONCE),
            "dlq_messages": DEAD,
            "retry_rate": len(ALWAYS_FAIL | FAIL_ONCE) / N_ORDERS,
            "dlq_rate": DEAD / N_ORDERS,
        }
    ]


def test_delay_levels_split_user_delays_from_retries(engine_report):
    sections, _ = engine_report
    got = {r["level"]: (r["delayed_messages"], r["retry_messages"]) for r in sections["delay_levels"]}
    # The broker parks a send-back at 3 + reconsume times unless the consumer asks for a level.
    assert got == {
        1: (DELAYED[1], 0),
        2: (DELAYED[2], 0),
        3: (0, len(ALWAYS_FAIL)),
        4: (0, len(ALWAYS_FAIL)),
        PARK_LEVEL: (DELAYED[PARK_LEVEL], len(FAIL_ONCE)),
    }
    assert all(r["messages"] == r["delayed_messages"] + r["retry_messages"] for r in sections["delay_levels"])


def test_the_sections_agree_with_each_other(engine_report):
    sections, _ = engine_report
    retry_row = sections["retry_dlq"][0]
    parked_retries = sum(r["retry_messages"] for r in sections["delay_levels"])
    # Every send-back of this broker passes through the schedule topic: the two sections count
    # the same records.
    assert retry_row["retry_messages"] == parked_retries
    throughput = {r["topic"]: r["messages"] for r in sections["throughput"]}
    assert retry_row["redelivered_messages"] == throughput[retry_topic(GROUP)]
    assert retry_row["dlq_messages"] == throughput[dlq_topic(GROUP)]
    assert sum(r["messages"] for r in sections["delay_levels"]) == throughput[SCHEDULE_TOPIC]
    sizes = {r["topic"]: r["messages"] for r in sections["size"]}
    assert sizes == {**USER, "*": sum(USER.values())}
    assert retry_row["source_messages"] == sizes[ORDERS]
    assert sum(r["messages"] for r in sections["size_histogram"]) == sizes["*"]
    assert sum(r["messages"] for r in sections["latency_histogram"]) == sizes["*"]
    assert sections["transactions"] == []


def test_the_throughput_chart_spans_the_hours_of_the_data(engine_report):
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    from analytics.charts import throughput_figure
    from analytics.spark.catalog import HOUR_MS

    sections, _ = engine_report
    rows = sections["throughput"]
    hours = sorted({r["hour_start_ms"] for r in rows if r["kind"] == "normal"})
    fig = throughput_figure(rows)
    try:
        ax = fig.axes[0]
        left, right = (round(mdates.num2date(x).timestamp() * 1000) for x in ax.get_xlim())
        assert (left, right) == (hours[0] - HOUR_MS // 2, hours[-1] + HOUR_MS // 2)
        ticks = [round(mdates.num2date(x).timestamp() * 1000) for x in ax.get_xticks()]
        assert ticks == hours  # one tick per hour of data: an axis of hours, not of years
        lines = ax.get_lines()
        assert sorted(line.get_label() for line in lines) == [
            f"{AUDIT} ({USER[AUDIT]})",
            f"{ORDERS} ({N_ORDERS})",
        ]
        styles = {(line.get_marker(), line.get_linestyle(), line.get_markersize()) for line in lines}
        assert len(styles) == len(lines)  # each series drawn its own way
    finally:
        plt.close(fig)
