"""`kill -USR1 <pid>` prints every thread's stack of an engine process and leaves it running (as
jstack does for a Java broker): how a hang is seen, by an operator or by a harness whose SIGTERM
went unanswered (tests/browser/make_run_stack.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from broker.local_cluster import ROOT, free_port


def test_sigusr1_dumps_every_thread_and_sigterm_still_stops_cleanly():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "broker.namesrv", "--listen-port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    listening, dumped = threading.Event(), threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "listening on" in line:
                listening.set()
            if "most recent call first" in line:
                dumped.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(60), "".join(lines)
        process.send_signal(signal.SIGUSR1)
        assert dumped.wait(30), "".join(lines)
        assert process.poll() is None  # still serving
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    reader.join(10)
    dump = "".join(lines)
    assert "Current thread" in dump or "Thread 0x" in dump
    assert "service_runner.py" in dump  # the main thread, waiting in serve_until_signalled's loop
