"""The storage, query and retention tests of metric history again on PostgreSQL (the engine of
production consoles): bulk inserts, ``ignore_conflicts``, the indexes and the time arithmetic must
hold on both. Runs them in a child pytest with DATABASE_URL set to a database of its own (Django
creates ``test_<name>`` beside the others, so parallel runs do not collide); skipped with the reason
when PostgreSQL does not answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = os.environ.get("HISTORY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
STORAGE_TESTS = [
    "tests/history/test_query.py",
    "tests/history/test_retention.py",
    "tests/history/test_schedule.py",
]


def _reachable(url: str) -> str | None:
    """None when PostgreSQL answers at ``url``, else why not."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(f"{url}/postgres", connect_timeout=3) as connection:
            connection.execute("select 1")
    except Exception as exc:  # any failure to connect means: not here
        return f"PostgreSQL at {url} does not answer: {exc}"
    return None


def test_storage_tests_pass_on_postgresql(tmp_path):
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("this run is on PostgreSQL already: the storage tests ran on it")
    why_not = _reachable(SERVER)
    if why_not:
        pytest.skip(why_not)
    env = {
        **os.environ,
        "DATABASE_URL": f"{SERVER}/history_{uuid.uuid4().hex[:10]}",
        "CONSOLE_VAR_DIR": str(tmp_path / "var"),
    }
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *STORAGE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout and "skipped" not in child.stdout
