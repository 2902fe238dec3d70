"""The benchmarks' code paths on tiny workloads: every figure present and positive (no speed
assertion — speed is reported by ``make bench``, never tested)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_json(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, *args, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_store_bench_reports_every_figure(tmp_path):
    figures = run_json(
        "bench/store.py", "--messages", "2000", "--sync-messages", "256", "--dir", str(tmp_path)
    )
    for key in (
        "async_single_msgs_s",
        "async_batch32_msgs_s",
        "sync_1_writer_msgs_s",
        "sync_32_writers_msgs_s",
        "read_msgs_s",
        "disk_seq_write_mb_s",
        "disk_fdatasync_per_s",
        "ratio_sync32_vs_fdatasync",
    ):
        assert figures[key] > 0, key


@pytest.mark.parametrize(("peer", "rounds"), [("ours", 2), ("ours-threads", 1), ("sync-master", 1)])
def test_broker_bench_runs_our_workloads(tmp_path, peer, rounds):
    results = run_json(
        "bench/broker.py", "--only", peer, "--messages", "256", "--seconds", "0.5", "--dir", str(tmp_path),
        "--broker-conf", "busyPollWindowMicros=100", "--rounds", str(rounds), "--warm-up", "64",
    )  # fmt: skip
    assert results["ours_broker_conf"] == {"busyPollWindowMicros": "100"}
    assert results["warm_up_messages"] == 64
    assert results["rounds"] == rounds
    ours = results[peer]
    assert ours["completed_rounds"] == rounds
    if rounds > 1:  # the reported figure is the median of the rounds' figures
        per_round = sorted(r["e2e_p50_ms"] for r in ours["rounds"])
        assert len(per_round) == rounds
        assert ours["e2e_p50_ms"] == pytest.approx(sum(per_round[:2]) / 2)
    assert "skipped" not in ours, ours
    for key in (
        "sync_send_msgs_s",
        "async_send_64_msgs_s",
        "batch_send_32_msgs_s",
        "consume_msgs_s",
        "e2e_p99_ms",
    ):
        assert ours[key] > 0, key
    assert ours["e2e_samples"] == 500


def test_interleaved_latency_pools_each_peers_turns(tmp_path):
    results = run_json(
        "bench/broker.py", "--only", "ours", "--interleave-latency", "2", "--seconds", "0.5",
        "--warm-up", "16", "--dir", str(tmp_path),
    )  # fmt: skip
    assert results["interleaved_latency_turns"] == 2
    ours = results["ours"]
    assert ours["e2e_samples"] == 500  # two turns of 0.25 s at 1,000 msgs/s
    assert 0 < ours["e2e_p50_ms"] <= ours["e2e_p99_ms"]
    assert "sync_send_msgs_s" not in ours  # the latency run only


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--broker-conf", "busyPollWindowMicros"], "is not KEY=VALUE"),
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--warm-up", "-1"], "--warm-up cannot be negative"),
        (["--interleave-latency", "-2"], "--interleave-latency cannot be negative"),
        (["--interleave-latency", "2", "--rounds", "2"], "give one or the other"),
    ],
)
def test_broker_bench_refuses_bad_arguments(args, reason):
    out = subprocess.run(
        [sys.executable, "bench/broker.py", "--only", "ours", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert reason in out.stderr


def test_broker_path_bench_reports_cpu_per_message():
    out = subprocess.run(
        [sys.executable, "bench/broker_path.py", "--messages", "300", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    figures = dict(line.split()[:2] for line in out.stdout.strip().splitlines())
    assert set(figures) == {
        "send_one_per_turn_us",
        "send_pipelined_us",
        "send_v2_pipelined_us",
        "send_to_held_pull_us",
        "send_to_pull_answer_us",
    }
    assert all(float(value) > 0 for value in figures.values())
