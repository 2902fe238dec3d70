"""A killed test run leaves no processes behind (issue 33): what a pytest starts dies with it, and
a session's start kills what an earlier killed run of this checkout left."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.process_ties import MARKER, run_marker
from tests.scripts.test_run_stack import alive, wait_gone

ROOT = Path(__file__).resolve().parents[2]
VICTIM = Path(__file__).with_name("killed_run_victim.py")


def run_pytest(test: str, **env: str) -> subprocess.Popen[bytes]:
    """A pytest of this checkout running one test of the victim module."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", f"{VICTIM}::{test}", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_file(path: Path, process: subprocess.Popen[bytes], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"no pids written (pytest rc={process.poll()})")


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_sigkilled_pytest_leaves_no_process_behind(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    victim = run_pytest("test_start_processes_and_wait", VICTIM_PIDS=str(pids_file))
    pids = [int(pid) for pid in wait_for_file(pids_file, victim).split()]
    try:
        victim.kill()
        victim.wait()
        survivors = [pid for pid in pids if not wait_gone(pid, timeout=20)]
    finally:
        kill_all(pids)
    assert len(pids) == 4
    assert survivors == []


@pytest.fixture
def leftovers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Sleeping processes as a killed run would leave them: its marker names an owner that is gone."""
    gone_owner = "4194304:0"  # above any pid_max: never a live process
    base = {k: v for k, v in os.environ.items() if k != MARKER}
    markers = {
        "earlier run": {MARKER: f"{ROOT}|{gone_owner}"},
        "other checkout": {MARKER: f"{ROOT}-elsewhere|{gone_owner}"},
        "unmarked": {},
        "this live run": {MARKER: os.environ.get(MARKER, run_marker(ROOT))},
    }
    started = {
        name: subprocess.Popen(["sleep", "600"], env={**base, **extra}) for name, extra in markers.items()
    }
    yield started
    kill_all([process.pid for process in started.values()])
    for process in started.values():
        process.wait()


def test_a_session_start_reaps_an_earlier_runs_leftovers(
    leftovers: dict[str, subprocess.Popen[bytes]],
) -> None:
    session = run_pytest("test_nothing")
    assert session.wait(timeout=120) == 0
    assert leftovers["earlier run"].wait(timeout=10) == -signal.SIGKILL
    assert [name for name, process in leftovers.items() if alive(process.pid)] == [
        "other checkout",
        "unmarked",
        "this live run",
    ]
