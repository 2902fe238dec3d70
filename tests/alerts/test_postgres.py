"""The alert lifecycle and evaluation-cost tests again on PostgreSQL (production consoles' engine):
the partial unique index of open events, bulk writes returning ids, time arithmetic
(tests/postgres_rerun.py: a child pytest on a database of its own). About 40 s (the child migrates
its database), so under ``slow``."""

from __future__ import annotations

import pytest

from tests.postgres_rerun import rerun_on_postgresql

TESTS = ["tests/alerts/test_alert_lifecycle.py", "tests/alerts/test_evaluation_cost.py"]


@pytest.mark.slow
def test_alert_tests_pass_on_postgresql(tmp_path):
    rerun_on_postgresql(TESTS, "alerts", tmp_path / "var")
