"""The cluster decode benchmark's code path on a tiny archive: a figure for each master, every
master counting the rows written (the benchmark exits non-zero otherwise), nothing left behind.
No speed assertion: speed is reported by the benchmark, never tested. Slow: three Spark sessions
and a standalone cluster (187 s measured on 2 busy cores)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_decode_benchmark_measures_local_and_cluster(tmp_path):
    command = [sys.executable, "bench/spark_decode.py", "--size", "4M", "--segment-mb", "1",
               "--dir", str(tmp_path), "--json"]  # fmt: skip
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1100)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    masters = [r["master"] for r in figures["results"]]
    assert masters[:2] == ["local[1]", "local[2]"] and masters[2].startswith("cluster (spark://127.0.0.1:")
    for result in figures["results"]:
        assert result["rows"] == result["frame_rows"] == figures["messages"] > 1000
        assert min(result["decode_rows_s"], result["decode_mb_s"], result["frame_rows_s"]) > 0
    assert list(tmp_path.iterdir()) == []  # archive, store and the cluster's work dir removed
