"""The tests of values the console's forms must refuse before the database does, again on
PostgreSQL (production consoles' engine): SQLite stores a string longer than its column and any
integer, PostgreSQL raises a DataError (a 500) — the tail filters' and the report schedules' bounds
must make both a 400 (tests/postgres_rerun.py: a child pytest on a database of its own; about
12 s)."""

from __future__ import annotations

from tests.postgres_rerun import rerun_on_postgresql

TESTS = [
    "tests/console/test_tail_filters.py",
    "tests/analytics/test_analytics_pages.py::test_schedule_values_beyond_their_bounds_are_refused",
]


def test_values_the_columns_cannot_hold_are_refused_on_postgresql(tmp_path):
    rerun_on_postgresql(TESTS, "console_bounds", tmp_path / "var")
