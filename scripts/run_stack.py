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

A process that exits by itself does not stop the others (honcho's manager stops everything, which
turned `make run-ha`'s failover — kill the master — into a dead stack). It is reported, and
restarted when the Procfile gives it a restart policy in a comment line honcho ignores::

    # run_stack: restart broker1 broker2 delay=10

The first restart comes ``delay`` seconds (default 1) after the exit, each further one twice as
late, and a process that exited ``RESTART_CAP + 1`` times within ``RESTART_WINDOW_SECONDS`` is
given up: a crash loop is not hidden. The runner ends by itself only when nothing is left running
or waiting to restart.

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
ANNOTATION = "# run_stack:"
DEFAULT_RESTART_DELAY_SECONDS = 1.0
RESTART_CAP = 5  # restarts within the window; the next exit is given up
RESTART_WINDOW_SECONDS = 600.0


def seconds_setting(name: str, raw: str) -> float:
    """``raw`` as seconds above 0 and at most an hour, or a SystemExit naming ``name``."""
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:  # also refuses nan and inf
        raise SystemExit(f"{name}={raw!r}: give seconds between 0 and 3600")
    return seconds


def stop_timeout_seconds(environ: dict[str, str]) -> float:
    """The grace period from ``STACK_STOP_TIMEOUT``, refusing what is not a sensible number."""
    raw = environ.get("STACK_STOP_TIMEOUT", "").strip()
    return seconds_setting("STACK_STOP_TIMEOUT", raw) if raw else DEFAULT_STOP_TIMEOUT_SECONDS


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"rc={returncode}"


class Console:
    """Prints every process's lines as ``HH:MM:SS name | line``, one line at a time."""

    def __init__(self, names: list[str]) -> None:
        self._width = max(len("system"), *(len(name) for name in names))
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        with self._lock:
            sys.stdout.write(f"{time.strftime('%H:%M:%S')} {name:<{self._width}} | {line}\n")
            sys.stdout.flush()


@dataclass(frozen=True)
class RestartPolicy:
    delay: float = DEFAULT_RESTART_DELAY_SECONDS

    def next_delay(self, recent_restarts: int) -> float:
        """Twice as long after each restart still within the window."""
        return self.delay * 2**recent_restarts


@dataclass
class StackProcess:
    name: str
    command: str
    restart: RestartPolicy | None = None
    popen: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = field(default=None, repr=False)
    restart_at: float | None = None  # monotonic; set while waiting to be restarted
    restarts: list[float] = field(default_factory=list)  # when each restart happened (monotonic)
    exited_by_itself: bool = False

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

    @property
    def waiting(self) -> bool:
        return self.restart_at is not None

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

    def reap(self) -> int:
        """The exit status, once the last lines are relayed."""
        assert self.popen is not None
        returncode = self.popen.wait()
        if self.reader is not None:
            self.reader.join(timeout=5)
        return returncode


class Stack:
    def __init__(self, processes: list[StackProcess], stop_timeout: float) -> None:
        self.processes = processes
        self.stop_timeout = stop_timeout
        self.console = Console([p.name for p in processes])
        self._stop_signal: int | None = None
        # 0 when asked to stop, no process ended by itself and every one stopped cleanly; else 1.
        self.returncode = 0

    def request_stop(self, signum: int, _frame: object) -> None:
        # Only a note, taking no lock: the handler runs in the main thread between any two of its
        # steps, perhaps while it holds the console's lock (a Ctrl-C right after a line of its
        # own hung the runner) or an Event's.
        self._stop_signal = signum

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)
        for process in self.processes:
            process.start(self.console)
        # A process ending does not end the stack (a broker's death is what make run-ha's
        # failover is about): it is reported, restarted by its policy, and the rest run on.
        while self._stop_signal is None:
            now = time.monotonic()
            for process in self.processes:
                self._look_after(process, now)
            if not any(p.running or p.waiting for p in self.processes):
                self.console.say("system", "no process left running or waiting to restart, stopping")
                break
            time.sleep(_EXIT_POLL_SECONDS)
        if self._stop_signal is not None:
            self.console.say("system", f"{signal.Signals(self._stop_signal).name} received, stopping")
        self._stop_all()
        return self.returncode

    def _look_after(self, process: StackProcess, now: float) -> None:
        if process.restart_at is not None:
            if now >= process.restart_at:
                process.restart_at = None
                process.restarts.append(now)
                process.start(self.console)
        elif process.popen is not None and not process.running and not process.exited_by_itself:
            self._exited(process, now)

    def _exited(self, process: StackProcess, now: float) -> None:
        """Report a process that ended by itself and, by its policy, schedule its restart."""
        process.exited_by_itself = True
        self.returncode = 1  # the stack did not do all its job
        name = process.name
        said = f"{name} exited by itself ({describe_exit(process.reap())}); "
        if self._stop_signal is not None:
            self.console.say("system", said + "the stack is stopping")
            return
        if process.restart is None:
            self.console.say("system", said + "not restarted (no restart policy); the others keep running")
            return
        process.restarts = [at for at in process.restarts if now - at < RESTART_WINDOW_SECONDS]
        recent = len(process.restarts)
        window = f"{RESTART_WINDOW_SECONDS:g} s"
        if recent >= RESTART_CAP:
            said += f"{name} exited {recent + 1} times within {window}: not restarted again"
            self.console.say("system", said + "; the others keep running")
            return
        delay = process.restart.next_delay(recent)
        process.restart_at = now + delay
        process.exited_by_itself = False  # its next run is watched again
        said += f"restarting {name} in {delay:g} s (restart {recent + 1} of {RESTART_CAP} within {window})"
        self.console.say("system", said)

    def _stop_all(self) -> None:
        # Only what runs now is stopped; a process that ended by itself is reported, not stopped.
        for process in self.processes:
            if process.restart_at is None:
                self._look_after(process, time.monotonic())  # one that ended after the last look
        stopping = [p for p in self.processes if p.running]
        for process in stopping:
            self.console.say("system", f"sending SIGTERM to {process.name}")
            process.signal_leader(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while any(p.running for p in stopping) and time.monotonic() < deadline:
            time.sleep(_EXIT_POLL_SECONDS)
        for process in stopping:
            if process.running:
                self.console.say("system", f"{process.name} still running, sending SIGKILL")
                process.kill_group()
        for process in stopping:
            returncode = process.reap()
            self.console.say("system", f"{process.name} stopped (rc={returncode})")
            if returncode != 0:
                self.returncode = 1


def read_restart_policies(text: str, procfile: Path, names: list[str]) -> dict[str, RestartPolicy]:
    """The ``# run_stack: restart <name>... [delay=<seconds>]`` lines of a Procfile."""
    policies: dict[str, RestartPolicy] = {}
    for line in text.splitlines():
        if not line.strip().startswith(ANNOTATION):
            continue
        words = line.strip()[len(ANNOTATION) :].split()
        if not words or words[0] != "restart":
            first = words[0] if words else ""
            raise SystemExit(f"{procfile}: {line.strip()!r}: {first!r}: the only policy is restart")
        delay = DEFAULT_RESTART_DELAY_SECONDS
        listed = []
        for word in words[1:]:
            if word.startswith("delay="):
                delay = seconds_setting("delay", word.removeprefix("delay="))
            elif word not in names:
                raise SystemExit(f"{procfile}: {word!r} is not a process of {procfile}")
            elif word in policies or word in listed:
                raise SystemExit(f"{procfile}: {word!r} has two restart lines")
            else:
                listed.append(word)
        if not listed:
            raise SystemExit(f"{procfile}: {line.strip()!r}: restart names no process")
        policies.update(dict.fromkeys(listed, RestartPolicy(delay)))
    return policies


def read_processes(procfile: Path) -> list[StackProcess]:
    try:
        text = procfile.read_text()
    except OSError as error:
        raise SystemExit(f"{procfile}: {error.strerror}") from None
    parsed = parse_procfile(text)
    if not parsed.processes:
        raise SystemExit(f"{procfile}: no processes")
    policies = read_restart_policies(text, procfile, list(parsed.processes))
    return [StackProcess(name, command, policies.get(name)) for name, command in parsed.processes.items()]


def main(argv: list[str]) -> int:
    procfile = Path(argv[0]) if argv else Path("Procfile")
    stack = Stack(read_processes(procfile), stop_timeout_seconds(dict(os.environ)))
    return stack.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
