"""Tie child processes to the process that started them: they die with it, however it dies.

Three parts, used by ``scripts/run_stack.py`` (the product's runner), ``broker/local_cluster.py``
(the launcher of name servers, brokers and controllers) and the test suite (``tests/conftest.py``):

- ``die_with``: a parent-death signal (Linux), armed in the child before exec. It reaches the
  child only, and it follows the *thread* that forked the child: a child forked from a thread that
  ends is killed then. Fork from the main thread (or one that lives as long as the process).
- ``Keeper``: a process of its own holding the read end of a pipe the kernel closes when its owner
  dies (SIGKILL included). Then it SIGKILLs the process groups it was told about and every process
  of this user carrying its run marker: grandchildren, shells' children and browsers included.
- ``reap_leftovers``: kills the marked processes of an earlier run of the same checkout whose owner
  is gone (its keeper was killed with it, e.g. a whole process tree killed by a CI timeout).

A run marker is ``PYROCKET_TEST_RUN=<checkout>|<owner pid>:<owner start time>`` in a process's
environment: children inherit it, ``/proc/<pid>/environ`` shows it, and the owner's start time
tells a live owner from a reused pid. Only processes of the same user are ever read or killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

MARKER = "PYROCKET_TEST_RUN"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_ROOT = Path(__file__).resolve().parents[1]


def die_with(owner_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when its parent thread dies.

    A SIGKILLed owner cannot stop anything itself. Only prctl and getppid run in the child (no lock
    is taken between fork and exec). The signal survives the exec."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != owner_pid:  # the owner died before the signal was armed
            os._exit(1)

    return arm


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields after the command name start at field 3


def run_marker(checkout: Path, pid: int | None = None) -> str:
    """The marker value naming one run (its owner process) of one checkout."""
    pid = os.getpid() if pid is None else pid
    return f"{checkout.resolve()}|{pid}:{_start_time(pid)}"


def _markers() -> Iterator[tuple[int, str]]:
    """(pid, marker value) of this user's processes that carry a run marker."""
    uid, prefix = os.getuid(), f"{MARKER}=".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        for variable in environ.split(b"\0"):
            if variable.startswith(prefix):
                yield int(entry), variable[len(prefix) :].decode(errors="replace")


def kill_marked(marker: str, spare: frozenset[int] = frozenset()) -> list[int]:
    """SIGKILLs this user's processes carrying ``marker``, until none is left (one may fork while
    the others die). The pids killed."""
    spare |= {os.getpid()}
    killed: list[int] = []
    for _ in range(20):
        found = [pid for pid, value in _markers() if value == marker and pid not in spare]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    return killed


def _owner_alive(marker: str) -> bool:
    owner = marker.rsplit("|", 1)[1]
    pid, _, started = owner.partition(":")
    return pid.isdigit() and _start_time(int(pid)) == started


def reap_leftovers(checkout: Path) -> list[int]:
    """Kills what earlier runs of ``checkout`` left running: marked processes whose owner is gone.
    Other checkouts' runs and live runs (an outer test run of a nested one) are left alone."""
    prefix = f"{checkout.resolve()}|"
    dead = {value for _, value in _markers() if value.startswith(prefix) and not _owner_alive(value)}
    return [pid for marker in dead for pid in kill_marked(marker)]


class Keeper:
    """Kills the owner's process groups, and the processes carrying its marker, once the owner dies.

    The keeper learns groups as they start (``watch``) and end (``forget``); its pipe is not
    inherited by the owner's other children, so its input ends exactly when the owner is gone (or
    calls ``close``)."""

    def __init__(self, marker: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != MARKER}  # never a target of its own
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH", "")]))
        argv = [sys.executable, "-m", "broker.process_ties", str(os.getpid()), *([marker] if marker else [])]
        self._popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE, text=True, start_new_session=True, env=env
        )

    def _send(self, line: str) -> None:
        assert self._popen.stdin is not None
        self._popen.stdin.write(line + "\n")
        self._popen.stdin.flush()

    def watch(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        """Before the group's leader is reaped: while its zombie lives, no other group has its id."""
        self._send(f"-{pgid}")

    def close(self) -> None:
        """Ends the keeper now: it kills what is left, as it would had the owner died."""
        assert self._popen.stdin is not None
        self._popen.stdin.close()
        self._popen.wait()


def _keep(owner: int, marker: str | None) -> None:
    groups: set[int] = set()
    for line in sys.stdin:
        (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    if marker:
        kill_marked(marker, spare=frozenset({owner}))


if __name__ == "__main__":
    _keep(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
