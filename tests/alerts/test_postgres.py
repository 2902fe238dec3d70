"""The alert lifecycle and evaluation-cost tests again on PostgreSQL (production consoles' engine):
the partial unique index of open events, bulk writes returning ids, time arithmetic. A child pytest
with DATABASE_URL set to a database of its own, as the metric history's PostgreSQL test does;
skipped with the reason when PostgreSQL does not answer. About 40 s (the child migrates a database of
its own), so under ``slow``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.history.test_postgres import SERVER, _reachable

ROOT = Path(__file__).resolve().parents[2]
TESTS = ["tests/alerts/test_alert_lifecycle.py", "tests/alerts/test_evaluation_cost.py"]


@pytest.mark.slow
def test_alert_tests_pass_on_postgresql(tmp_path):
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("this run is on PostgreSQL already: the alert tests ran on it")
    why_not = _reachable(SERVER)
    if why_not:
        pytest.skip(why_not)
    env = {
        **os.environ,
        "DATABASE_URL": f"{SERVER}/alerts_{uuid.uuid4().hex[:10]}",
        "CONSOLE_VAR_DIR": str(tmp_path / "var"),
    }
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout and "skipped" not in child.stdout
