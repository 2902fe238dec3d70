"""Acceptance 1: a known workload written through the real store, archived (one torn tail), read
by the real Spark job in local mode; every report figure equals the truth computed while writing.

One Spark session and one full report run for the module (Spark start-up costs seconds)."""

from __future__ import annotations

import csv

import pytest

from analytics.spark import reports
from analytics.spark.job import ReportRequest, run_report
from broker.common.delay_levels import DEFAULT_DELAY_LEVELS
from broker.common.topic_config import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.analytics.workload import T0, WorkloadWriter, expected


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    root = tmp_path_factory.mktemp("analytics-workload")
    writer = WorkloadWriter(root / "store")
    writer.write()
    archived = writer.archive(root / "archive")
    return writer, root, archived


@pytest.fixture(scope="module")
def full_report(workload, spark):
    writer, root, _ = workload
    stages = []
    request = ReportRequest("all", str(root / "archive"), str(root / "reports"))
    result = run_report(spark, request, lambda pct, stage: stages.append((pct, stage)))
    return result, expected(writer.truth), stages


def by(rows, *keys):
    return {tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]: row for row in rows}


def test_the_workload_spans_several_segments_and_hours(workload):
    writer, _, archived = workload
    assert len(archived) >= 5
    hours = {r["store_timestamp"] // reports.HOUR_MS for r in writer.truth.stored}
    assert len(hours) >= 2


def test_every_record_is_read_once_and_the_torn_tail_is_reported(full_report, workload):
    result, truth, _ = full_report
    kinds = by(result.sections["inputs"], "kind")
    for kind, count in truth["kinds"].items():
        assert kinds[kind]["records"] == count, kind
    assert kinds["torn"]["records"] == 1
    assert kinds["torn"]["store_bytes"] == workload[0].truth.torn_bytes
    assert sum(r["records"] for r in result.sections["inputs"]) == sum(truth["kinds"].values()) + 1


def test_throughput_per_topic_per_hour(full_report):
    result, truth, _ = full_report
    got = {
        (r["hour_start_ms"], r["topic"]): (r["messages"], r["bytes"]) for r in result.sections["throughput"]
    }
    assert got == truth["throughput"]


@pytest.mark.parametrize("section", ["size", "latency"])
def test_distributions_match_exact_percentiles(full_report, section):
    result, truth, _ = full_report
    got = by(result.sections[section], "topic")
    assert set(got) == set(truth[section])
    for topic, want in truth[section].items():
        for field, value in want.items():
            assert got[topic][field] == pytest.approx(value), (topic, field)


@pytest.mark.parametrize("section", ["size_histogram", "latency_histogram"])
def test_histograms(full_report, section):
    result, truth, _ = full_report
    assert {r["le"]: r["messages"] for r in result.sections[section]} == truth[section]


def test_retry_and_dlq_rates_per_group(full_report):
    result, truth, _ = full_report
    got = by(result.sections["retry_dlq"], "group")
    assert set(got) == set(truth["retry_dlq"])
    for group, want in truth["retry_dlq"].items():
        for field, value in want.items():
            assert got[group][field] == pytest.approx(value), (group, field)
        assert want["dlq_messages"] > 0 and want["retry_messages"] > want["retried_messages"]


def test_delay_level_usage(full_report):
    result, truth, _ = full_report
    got = by(result.sections["delay_levels"], "level")
    assert set(got) == set(truth["delay_levels"])
    for level, want in truth["delay_levels"].items():
        assert {k: got[level][k] for k in want} == want
        assert got[level]["delay"] == DEFAULT_DELAY_LEVELS.split()[level - 1]


def test_transaction_outcomes(full_report):
    result, truth, _ = full_report
    got = by(result.sections["transactions"], "topic")
    assert set(got) == set(truth["transactions"])
    for topic, want in truth["transactions"].items():
        for outcome in ("transactions", "committed", "rolled_back", "pending", "given_up"):
            assert got[topic][outcome] == want[outcome], (topic, outcome)
    assert all(got["*"][o] > 0 for o in ("committed", "rolled_back", "pending", "given_up"))


@pytest.mark.parametrize(("section", "column"), [("top_keys", "key"), ("top_tags", "tag")])
def test_top_keys_and_tags(full_report, section, column):
    result, truth, _ = full_report
    ranked = sorted(truth[section].items(), key=lambda item: (-item[1], item[0]))[:20]
    assert [(r[column], r["messages"]) for r in result.sections[section]] == ranked


def test_files_for_download_hold_the_same_rows(full_report, spark):
    result, _, stages = full_report
    for section, rows in result.sections.items():
        files = result.files[section]
        with open(files["csv"], newline="") as handle:
            assert len(list(csv.DictReader(handle))) == len(rows), section
        # Spark reads the Parquet file back with the section's own columns and rows.
        parquet = spark.read.parquet(files["parquet"])
        assert [row.asDict() for row in parquet.collect()] == rows, section
        assert not rows or parquet.columns == list(rows[0]), section
    assert stages[0][0] < stages[-1][0] <= 95  # progress moved forward while the job ran


def test_time_range_and_topic_filters(workload, spark):
    """One more (small) run: only payments, only the second hour of store time."""
    writer, root, _ = workload
    start, end = T0 + reports.HOUR_MS, T0 + 2 * reports.HOUR_MS
    request = ReportRequest(
        "throughput", str(root / "archive"), str(root / "filtered"), start, end, ["payments"]
    )
    rows = run_report(spark, request).sections["throughput"]
    want: dict[str, int] = {}
    kept_halves: set[int] = set()
    for r in writer.truth.stored:
        subject = r["properties"].get("RETRY_TOPIC") or r["properties"].get("REAL_TOPIC") or r["topic"]
        in_range = start <= r["store_timestamp"] < end
        if in_range and subject == "payments":
            want[r["topic"]] = want.get(r["topic"], 0) + 1
            if r["topic"] == TRANS_HALF_TOPIC:
                kept_halves.add(r["queue_offset"])
        elif in_range and r["topic"] == TRANS_OP_HALF_TOPIC and r["op_offset"] in kept_halves:
            want[r["topic"]] = want.get(r["topic"], 0) + 1
    assert {r["topic"]: r["messages"] for r in rows} == want
    # the retry, half and op records standing for payments count too
    assert "payments" in want and {TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC} <= set(want)
