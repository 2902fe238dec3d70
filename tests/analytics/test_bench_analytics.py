"""The decode benchmark's code path on a tiny archive: every figure present, the counts of the
single process and of Spark agree (the benchmark exits non-zero when they differ). No speed
assertion: speed is reported by the benchmark, never tested."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_decode_benchmark_reports_every_figure(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "bench/analytics_decode.py",
            "--size",
            "4M",
            "--segment-mb",
            "1",
            "--dir",
            str(tmp_path),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["segments"] >= 4 and figures["messages"] > 1000
    for key in (
        "disk_read_mb_s",
        "python_msgs_s",
        "spark_decode_msgs_s",
        "spark_frame_msgs_s",
        "ratio_spark_decode_per_core_vs_python",
        "ratio_python_vs_disk",
    ):
        assert figures[key] > 0, key
    assert list(tmp_path.iterdir()) == []  # the benchmark cleaned up after itself
