"""Run by tests/scripts/test_process_ties.py in a pytest of its own (not collected by the suite:
the name does not match ``test_*.py``)."""

import os
import subprocess
import time
from pathlib import Path

from broker.local_cluster import start_cluster


def test_start_processes_and_wait(tmp_path: Path) -> None:
    """A name server and a broker, and a shell in a session of its own with a child: the outer
    test SIGKILLs this pytest while they run."""
    cluster = start_cluster(tmp_path / "cluster")
    shell = subprocess.Popen(
        ["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert shell.stdout is not None
    child = int(shell.stdout.readline())
    pids = [cluster.namesrv.proc.pid, cluster.broker.proc.pid, shell.pid, child]
    Path(os.environ["VICTIM_PIDS"]).write_text(" ".join(map(str, pids)))
    time.sleep(600)


def test_nothing() -> None:
    """A session that only starts (and reaps) and ends."""
