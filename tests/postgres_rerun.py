"""Running a set of test files again on PostgreSQL (the engine of production consoles), in a
child pytest with DATABASE_URL naming a database of its own (Django creates ``test_<name>`` beside
the others, so parallel runs do not collide); skipped with the reason when PostgreSQL does not
answer, or when this run is on PostgreSQL already."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER = os.environ.get("HISTORY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


def reachable(url: str = SERVER) -> str | None:
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


def rerun_on_postgresql(tests: list[str], database_prefix: str, var_dir: Path) -> None:
    """Run ``tests`` in a child pytest on PostgreSQL; fail with its output when any fails."""
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("this run is on PostgreSQL already: these tests ran on it")
    why_not = reachable(SERVER)
    if why_not:
        pytest.skip(why_not)
    env = {
        **os.environ,
        "DATABASE_URL": f"{SERVER}/{database_prefix}_{uuid.uuid4().hex[:10]}",
        "CONSOLE_VAR_DIR": str(var_dir),
    }
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout and "skipped" not in child.stdout
