"""`make run`'s launcher stops the Celery worker warm on Ctrl-C instead of SIGKILLing it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "scripts" / "run_stack.py"


def procfile_line(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line
    raise AssertionError(f"the Procfile has no {name!r} process")


class OutputLog:
    """Collects a child's merged output from a thread so the test can wait for a line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(text in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no line with {text!r} in:\n" + "\n".join(self.lines))
                self._changed.wait(left)

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "\n".join(self.lines)


@pytest.fixture
def stack_dir(tmp_path: Path) -> Path:
    # The Procfile's own worker command beside a process that stops at once on SIGTERM, as the
    # name server, broker and web do (honcho's kill deadline started when the first one exited).
    companion = f"companion: exec {sys.executable} -c 'import signal, time; "
    companion += "signal.signal(signal.SIGTERM, lambda *_: exit(0)); time.sleep(600)'"
    (tmp_path / "Procfile").write_text(f"{procfile_line('worker')}\n{companion}\n")
    return tmp_path


def start_stack(stack_dir: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CONSOLE_VAR_DIR"] = str(stack_dir / "var")
    env.pop("REDIS_URL", None)  # the embedded default: Celery's filesystem transport
    return subprocess.Popen(
        [sys.executable, str(LAUNCHER), str(stack_dir / "Procfile")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_ctrl_c_stops_the_worker_warm(stack_dir: Path) -> None:
    stack = start_stack(stack_dir)
    output = OutputLog(stack)
    try:
        output.wait_for(" ready.", timeout=120)
        stack.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal delivers
        returncode = stack.wait(timeout=120)
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGKILL)
            stack.wait()
    text = output.text()
    assert "Warm shutdown" in text, text
    assert "worker stopped (rc=0)" in text, text
    # Only the worker's own process was signalled: its pool processes were stopped by it.
    assert "exited with 'signal 15" not in text, text
    assert "SIGKILL" not in text, text
    assert returncode == 0, text


def test_a_bad_stop_timeout_is_refused(stack_dir: Path) -> None:
    env = dict(os.environ, STACK_STOP_TIMEOUT="soon")
    result = subprocess.run(
        [sys.executable, str(LAUNCHER), str(stack_dir / "Procfile")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "STACK_STOP_TIMEOUT='soon'" in result.stderr
    assert "Traceback" not in result.stderr
