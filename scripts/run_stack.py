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
given up: a crash loop is not hidden. A run that lasted ``STACK_START_PERIOD`` seconds (default 30)
was a good start: the next exit is again the first. The runner ends by itself only when nothing is
left running or waiting to restart.

SIGHUP stops the stack as SIGINT and SIGTERM do; a second one kills what still runs. Whatever a
process leaves in its group when it ends is killed. The processes die with the runner, however it
dies (a parent-death signal), and one runner at a time holds a var dir (a lock file).

Usage: ``python scripts/run_stack.py [Procfile]``
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from honcho.environ import PROCFILE_LINE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo's modules
from broker.process_ties import Keeper, die_with

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STOP_TIMEOUT_SECONDS = 60.0
DEFAULT_START_PERIOD_SECONDS = 30.0  # up this long: a good start, its back-off starts over
_EXIT_POLL_SECONDS = 0.1
# How long an exit's report waits for the process's last lines: a child that left its group
# (setsid) may hold the output pipe for ever, and the main loop must not wait on it.
_OUTPUT_GRACE_SECONDS = 1.0
ANNOTATION = "# run_stack:"
# What was meant as an annotation but is not one (``#run_stack:``, ``# RUN-STACK:``...).
NEAR_MISS = re.compile(r"#\s*run[\s_-]?stack\s*:", re.IGNORECASE)
SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")  # plain decimals only: not 1_0, 1e-300, nan or inf
MIN_SECONDS = 0.1
MAX_SECONDS = 3600.0
DEFAULT_RESTART_DELAY_SECONDS = 1.0
RESTART_CAP = 5  # restarts within the window; the next exit is given up
RESTART_WINDOW_SECONDS = 600.0
LOCK_NAME = "run_stack.lock"


def seconds_setting(name: str, raw: str) -> float:
    """``raw`` as seconds from 0.1 to an hour, or a SystemExit naming ``name``."""
    if SECONDS.fullmatch(raw) and MIN_SECONDS <= float(raw) <= MAX_SECONDS:
        return float(raw)
    raise SystemExit(f"{name}={raw!r}: give seconds from {MIN_SECONDS:g} to {MAX_SECONDS:g}")


def environ_seconds(environ: dict[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    return seconds_setting(name, raw) if raw else default


def stop_timeout_seconds(environ: dict[str, str]) -> float:
    """The grace period from ``STACK_STOP_TIMEOUT``, refusing what is not a sensible number."""
    return environ_seconds(environ, "STACK_STOP_TIMEOUT", DEFAULT_STOP_TIMEOUT_SECONDS)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"rc={returncode}"


def lock_var_dir(environ: dict[str, str]) -> int:
    """Hold the var dir's lock for the runner's life, or a SystemExit naming its holder.

    Two stacks on one var dir fight over its ports, and their two Celery beats fire every schedule
    twice. flock is released by the kernel when the runner dies, however it dies; the descriptor is
    close-on-exec, so the processes it starts do not keep it."""
    var_dir = Path(environ.get("CONSOLE_VAR_DIR", ROOT / "var"))  # as project/settings.py
    var_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(var_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(descriptor, 32).decode("ascii", "replace").strip() or "unknown"
        os.close(descriptor)
        raise SystemExit(
            f"{var_dir} is in use by another run_stack.py (pid {holder}): stop that stack first "
            "or give this one another CONSOLE_VAR_DIR"
        ) from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())
    return descriptor


class Console:
    """Prints every process's lines as ``HH:MM:SS name | line``, one line at a time."""

    def __init__(self, names: list[str]) -> None:
        self._width = max(len("system"), *(len(name) for name in names))
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        with self._lock:
            try:
                sys.stdout.write(f"{time.strftime('%H:%M:%S')} {name:<{self._width}} | {line}\n")
                sys.stdout.flush()
            except OSError:  # the terminal is gone (SIGHUP): stopping the stack matters more
                pass


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
    started_at: float = 0.0  # monotonic
    ended_at: float | None = None  # when its exit was seen (monotonic)
    returncode: int | None = None  # of the run that ended
    reported: bool = False  # its run's exit was handled: the runner looks after it no more
    keeper: Keeper | None = field(default=None, repr=False)

    def start(self, console: Console) -> None:
        # A session of its own: Ctrl-C in the terminal reaches only this launcher, which then
        # stops each process in order rather than all of them at once mid-write.
        self.popen = subprocess.Popen(
            ["/bin/sh", "-c", self.command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with(os.getpid()),  # only prctl and getppid run there, no lock taken
        )
        if self.keeper is not None:
            self.keeper.watch(self.popen.pid)
        self.started_at = time.monotonic()
        self.ended_at = self.returncode = None
        self.reported = False
        console.say("system", f"{self.name} started (pid={self.popen.pid})")
        self.reader = threading.Thread(target=self._relay, args=(console,), daemon=True)
        self.reader.start()

    def _relay(self, console: Console) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        for raw in self.popen.stdout:
            console.say(self.name, raw.decode("utf-8", "replace").rstrip("\r\n"))

    @property
    def running(self) -> bool:
        """Started, and its exit not yet seen by :meth:`collect`."""
        return self.popen is not None and self.returncode is None

    @property
    def active(self) -> bool:
        """Running, ended but not yet reported, or waiting to be restarted."""
        return (self.popen is not None and not self.reported) or self.restart_at is not None

    def collect(self, now: float) -> None:
        """If it ended: kill what is left of its group, then reap it.

        Its background children would otherwise outlive it (one per restart) and hold its output
        pipe. The group is killed before the leader is reaped: the zombie keeps the group's id
        from being reused by an unrelated group."""
        if not self.running:
            return
        assert self.popen is not None
        if os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return
        self.kill_group()
        if self.keeper is not None:
            self.keeper.forget(self.popen.pid)
        self.returncode = self.popen.wait()
        self.ended_at = now

    def finish(self) -> None:
        """Wait for it to end, then :meth:`collect` it."""
        if self.running:
            assert self.popen is not None
            os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOWAIT)
            self.collect(time.monotonic())

    def output_done(self, now: float) -> bool:
        """Its last lines are relayed, or waited for long enough."""
        assert self.ended_at is not None
        reader_done = self.reader is None or not self.reader.is_alive()
        return reader_done or now - self.ended_at >= _OUTPUT_GRACE_SECONDS

    def signal_leader(self, signum: int) -> None:
        if self.running:  # not reaped yet: its pid is still its own
            assert self.popen is not None
            os.kill(self.popen.pid, signum)

    def kill_group(self) -> None:
        if self.popen is not None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Stack:
    def __init__(self, processes: list[StackProcess], stop_timeout: float, start_period: float) -> None:
        self.processes = processes
        self.stop_timeout = stop_timeout
        self.start_period = start_period
        self.console = Console([p.name for p in processes])
        self._stop_signal: int | None = None
        self._signals = 0  # how many stop signals came: the second one forces the stop
        # 0 when asked to stop, no process ended by itself and every one stopped cleanly; else 1.
        self.returncode = 0

    def request_stop(self, signum: int, _frame: object) -> None:
        # Only a note, taking no lock: the handler runs in the main thread between any two of its
        # steps, perhaps while it holds the console's lock (a Ctrl-C right after a line of its
        # own hung the runner) or an Event's.
        self._stop_signal = signum
        self._signals += 1

    def run(self) -> int:
        # SIGHUP (the terminal closed) stops the stack as Ctrl-C does, rather than killing the
        # runner alone and leaving its processes running.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.request_stop)
        keeper = Keeper()
        try:
            return self._run(keeper)
        finally:
            keeper.close()

    def _run(self, keeper: Keeper) -> int:
        for process in self.processes:
            process.keeper = keeper
            process.start(self.console)
        # A process ending does not end the stack (a broker's death is what make run-ha's
        # failover is about): it is reported, restarted by its policy, and the rest run on.
        while self._stop_signal is None:
            now = time.monotonic()
            for process in self.processes:
                self._look_after(process, now)
            # A process that ended and is not reported yet still counts: its report may restart it.
            if not any(p.active for p in self.processes):
                self.console.say("system", "no process left running or waiting to restart, stopping")
                break
            time.sleep(_EXIT_POLL_SECONDS)
        if self._stop_signal is not None:
            self.console.say("system", f"{signal.Signals(self._stop_signal).name} received, stopping")
        self._stop_all()
        return self.returncode

    def _look_after(self, process: StackProcess, now: float, *, stopping: bool = False) -> None:
        if process.restart_at is not None:
            if now >= process.restart_at and not stopping:
                process.restart_at = None
                process.restarts.append(now)
                process.start(self.console)
            return
        if process.popen is None or process.reported:
            return
        process.collect(now)
        if process.returncode is not None and (stopping or process.output_done(now)):
            process.reported = True
            self._exited(process, now)

    def _exited(self, process: StackProcess, now: float) -> None:
        """Report a process that ended by itself and, by its policy, schedule its restart."""
        assert process.returncode is not None and process.ended_at is not None
        self.returncode = 1  # the stack did not do all its job
        name = process.name
        said = f"{name} exited by itself ({describe_exit(process.returncode)}); "
        if self._stop_signal is not None:
            self.console.say("system", said + "the stack is stopping")
            return
        if process.restart is None:
            self.console.say("system", said + "not restarted (no restart policy); the others keep running")
            return
        if process.ended_at - process.started_at >= self.start_period:
            process.restarts.clear()  # a good start: only a crash loop backs off and is given up
        process.restarts = [at for at in process.restarts if now - at < RESTART_WINDOW_SECONDS]
        recent = len(process.restarts)
        window = f"{RESTART_WINDOW_SECONDS:g} s"
        if recent >= RESTART_CAP:
            said += f"{name} exited {recent + 1} times within {window}: not restarted again"
            self.console.say("system", said + "; the others keep running")
            return
        delay = process.restart.next_delay(recent)
        process.restart_at = now + delay
        said += f"restarting {name} in {delay:g} s (restart {recent + 1} of {RESTART_CAP} within {window})"
        self.console.say("system", said)

    def _stop_all(self) -> None:
        # Only what runs now is stopped; a process that ended by itself is reported, not stopped.
        for process in self.processes:
            self._look_after(process, time.monotonic(), stopping=True)  # ended since the last look
        stopping = [p for p in self.processes if p.running]
        for process in stopping:
            self.console.say("system", f"sending SIGTERM to {process.name}")
            process.signal_leader(signal.SIGTERM)
        self._wait_for(stopping)
        for process in stopping:
            if process.running:
                self.console.say("system", f"{process.name} still running, sending SIGKILL")
                process.kill_group()
        for process in stopping:
            process.finish()
            assert process.returncode is not None
            self.console.say("system", f"{process.name} stopped ({describe_exit(process.returncode)})")
            if process.returncode != 0:
                self.returncode = 1
        deadline = time.monotonic() + _OUTPUT_GRACE_SECONDS  # their last lines, within bounds
        for process in self.processes:
            if process.reader is not None:
                process.reader.join(timeout=max(0.0, deadline - time.monotonic()))

    def _wait_for(self, stopping: list[StackProcess]) -> None:
        """Until ``stopping`` ended, the stop timeout passed or another stop signal came."""
        signals = self._signals
        deadline = time.monotonic() + self.stop_timeout
        while time.monotonic() < deadline:
            for process in stopping:
                process.collect(time.monotonic())
            if not any(p.running for p in stopping):
                return
            if self._signals != signals:  # as honcho, foreman and docker do: stop now
                assert self._stop_signal is not None
                name = signal.Signals(self._stop_signal).name
                self.console.say("system", f"{name} received again, killing what still runs")
                return
            time.sleep(_EXIT_POLL_SECONDS)


def read_restart_policies(text: str, procfile: Path, names: list[str]) -> dict[str, RestartPolicy]:
    """The ``# run_stack: restart <name>... [delay=<seconds>]`` lines of a Procfile."""
    policies: dict[str, RestartPolicy] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        where, stripped = f"{procfile}:{number}", line.strip()
        if not stripped.startswith(ANNOTATION):
            if NEAR_MISS.match(stripped):  # silently ignored, it would leave a process unwatched
                raise SystemExit(f"{where}: {stripped!r}: write it as '{ANNOTATION} restart <name>...'")
            continue
        words = stripped[len(ANNOTATION) :].split()
        if not words or words[0] != "restart":
            first = words[0] if words else ""
            raise SystemExit(f"{where}: {first!r}: the only policy is restart")
        listed, delay = restart_words(words[1:], where, procfile, names)
        for name in listed:
            if name in policies:
                raise SystemExit(f"{where}: {name!r} has two restart lines")
            policies[name] = RestartPolicy(delay)
    return policies


def restart_words(words: list[str], where: str, procfile: Path, names: list[str]) -> tuple[list[str], float]:
    """The processes a restart line names, and its delay."""
    delay: float | None = None
    listed: list[str] = []
    for word in words:
        if word.startswith("delay="):
            if delay is not None:
                raise SystemExit(f"{where}: delay is given twice")
            try:
                delay = seconds_setting("delay", word.removeprefix("delay="))
            except SystemExit as error:
                raise SystemExit(f"{where}: {error}") from None
        elif word not in names:
            raise SystemExit(f"{where}: {word!r} is not a process of {procfile}")
        elif word in listed:
            raise SystemExit(f"{where}: {word!r} has two restart lines")
        else:
            listed.append(word)
    if not listed:
        raise SystemExit(f"{where}: restart names no process")
    return listed, DEFAULT_RESTART_DELAY_SECONDS if delay is None else delay


def read_commands(text: str, procfile: Path) -> dict[str, str]:
    """Each process's command, read as honcho reads a Procfile, refusing a name given twice
    (honcho's own parser ends in an AssertionError's traceback)."""
    commands: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = PROCFILE_LINE.match(line)
        if match is None:
            continue
        name, command = match.groups()
        if name in lines:
            raise SystemExit(f"{procfile}:{number}: {name!r} is already a process (line {lines[name]})")
        commands[name], lines[name] = command, number
    return commands


def read_processes(procfile: Path) -> list[StackProcess]:
    try:
        text = procfile.read_text()
    except OSError as error:
        raise SystemExit(f"{procfile}: {error.strerror}") from None
    commands = read_commands(text, procfile)
    if not commands:
        raise SystemExit(f"{procfile}: no processes")
    policies = read_restart_policies(text, procfile, list(commands))
    return [StackProcess(name, command, policies.get(name)) for name, command in commands.items()]


def main(argv: list[str]) -> int:
    procfile = Path(argv[0]) if argv else Path("Procfile")
    processes = read_processes(procfile)
    environ = dict(os.environ)
    stop_timeout = stop_timeout_seconds(environ)
    start_period = environ_seconds(environ, "STACK_START_PERIOD", DEFAULT_START_PERIOD_SECONDS)
    lock = lock_var_dir(environ)  # after every check: a refused Procfile takes no lock
    try:
        return Stack(processes, stop_timeout, start_period).run()
    finally:
        os.close(lock)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
