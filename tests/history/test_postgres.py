"""The storage, query and retention tests of metric history again on PostgreSQL (the engine of
production consoles): bulk inserts, ``ignore_conflicts``, the indexes and the time arithmetic must
hold on both (tests/postgres_rerun.py runs them in a child pytest on a database of its own)."""

from __future__ import annotations

from tests.postgres_rerun import rerun_on_postgresql

STORAGE_TESTS = [
    "tests/history/test_query.py",
    "tests/history/test_retention.py",
    "tests/history/test_schedule.py",
]


def test_storage_tests_pass_on_postgresql(tmp_path):
    rerun_on_postgresql(STORAGE_TESTS, "history", tmp_path / "var")
