"""Start the Procfile's processes together and stop them warm on Ctrl-C (what `make run` runs).

honcho's own manager stops a stack by sending SIGTERM to each process *group* and SIGKILLs what
still runs 5 seconds after the first process exits. Both broke the Celery worker's warm shutdown:
the SIGTERM reached the worker's pool processes (and a report's Spark JVM) directly, killing the
task they were running, and the worker's idle warm shutdown alone takes about 7 s on the filesystem
transport (its consumer drains the queue folder 2 s at a time, then joins pool, timer and pool
threads), so every Ctrl-C ended with the worker SIGKILLed (rc=-9).

Here each process is asked to stop by a SIGTERM to itself only — it stops its own children, as
Celery, daphne and the engine do — and gets ``STACK_STOP_TIMEOUT`` seconds (default 60) before its
whole group is killed. The Procfile is parsed by honcho, so its format is the one honcho documents.

Usage: ``python scripts/run_stack.py [Procfile]``
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from honcho.environ import parse_procfile

DEFAULT_STOP_TIMEOUT_SECONDS = 60.0
_EXIT_POLL_SECONDS = 0.1


def stop_timeout_seconds(environ: dict[str, str]) -> float:
    """The grace period from ``STACK_STOP_TIMEOUT``, refusing what is not a sensible number."""
    raw = environ.get("STACK_STOP_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_STOP_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise SystemExit(f"STACK_STOP_TIMEOUT={raw!r}: give seconds between 0 and 3600")
    return seconds


class Console:
    """Prints every process's lines as ``HH:MM:SS name | line``, one line at a time."""

    def __init__(self, names: list[str]) -> None:
        self._width = max(len("system"), *(len(name) for name in names))
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        with self._lock:
            sys.stdout.write(f"{time.strftime('%H:%M:%S')} {name:<{self._width}} | {line}\n")
            sys.stdout.flush()


@dataclass
class StackProcess:
    name: str
    command: str
    popen: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = field(default=None, repr=False)

    def start(self, console: Console) -> None:
        # A session of its own: Ctrl-C in the terminal reaches only this launcher, which then
        # stops each process in order rather than all of them at once mid-write.
        self.popen = subprocess.Popen(
            ["/bin/sh", "-c", self.command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        console.say("system", f"{self.name} started (pid={self.popen.pid})")
        self.reader = threading.Thread(target=self._relay, args=(console,), daemon=True)
        self.reader.start()

    def _relay(self, console: Console) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        for raw in self.popen.stdout:
            console.say(self.name, raw.decode("utf-8", "replace").rstrip("\r\n"))

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal_leader(self, signum: int) -> None:
        if self.running:
            assert self.popen is not None
            os.kill(self.popen.pid, signum)

    def kill_group(self) -> None:
        if self.popen is not None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Stack:
    def __init__(self, processes: list[StackProcess], stop_timeout: float) -> None:
        self.processes = processes
        self.stop_timeout = stop_timeout
        self.console = Console([p.name for p in processes])
        self._stop_requested = threading.Event()
        # 0 when asked to stop and every process stopped cleanly; 1 otherwise.
        self.returncode = 0

    def request_stop(self, signum: int, _frame: object) -> None:
        self.console.say("system", f"{signal.Signals(signum).name} received, stopping")
        self._stop_requested.set()

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)
        for process in self.processes:
            process.start(self.console)
        # Any process ending ends the stack, as with honcho: a half-running stack misleads.
        while not self._stop_requested.is_set() and all(p.running for p in self.processes):
            self._stop_requested.wait(_EXIT_POLL_SECONDS)
        if not self._stop_requested.is_set():
            ended = ", ".join(p.name for p in self.processes if not p.running)
            self.console.say("system", f"{ended} exited by itself, stopping the others")
            self.returncode = 1  # the stack did not do its job
        self._stop_all()
        return self.returncode

    def _stop_all(self) -> None:
        for process in self.processes:
            if process.running:
                self.console.say("system", f"sending SIGTERM to {process.name}")
                process.signal_leader(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while any(p.running for p in self.processes) and time.monotonic() < deadline:
            time.sleep(_EXIT_POLL_SECONDS)
        for process in self.processes:
            if process.running:
                self.console.say("system", f"{process.name} still running, sending SIGKILL")
                process.kill_group()
        for process in self.processes:
            assert process.popen is not None
            returncode = process.popen.wait()
            if process.reader is not None:
                process.reader.join(timeout=5)
            self.console.say("system", f"{process.name} stopped (rc={returncode})")
            if returncode != 0 and self.returncode == 0:
                self.returncode = 1


def read_processes(procfile: Path) -> list[StackProcess]:
    try:
        parsed = parse_procfile(procfile.read_text())
    except OSError as error:
        raise SystemExit(f"{procfile}: {error.strerror}") from None
    if not parsed.processes:
        raise SystemExit(f"{procfile}: no processes")
    return [StackProcess(name, command) for name, command in parsed.processes.items()]


def main(argv: list[str]) -> int:
    procfile = Path(argv[0]) if argv else Path("Procfile")
    stack = Stack(read_processes(procfile), stop_timeout_seconds(dict(os.environ)))
    return stack.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
