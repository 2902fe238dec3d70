"""Starting real engine processes on free loopback ports for integration tests."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LISTEN_LINE = re.compile(r"listening on (\S+):(\d+)")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port to listen on, below the kernel's ephemeral range.

    A port from ``bind(0)`` comes from the ephemeral range that outgoing connections also draw
    from: between this probe and the server's own bind, a client's connection could take it
    ("address already in use", seen in CI). Ports below that range are only ever taken by
    listeners. A port is handed out once per process, so two servers never get the same one.
    """
    low = max(1024, min(_EPHEMERAL_LOW, 65536) - 12_000)
    for _ in range(200):
        port = random.randrange(low, max(low + 1, _EPHEMERAL_LOW))
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as probe:  # a crowded machine: let the kernel choose
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class EngineProcess:
    """A child process that prints ``... listening on HOST:PORT`` once it serves."""

    def __init__(self, args: list[str], timeout: float = 30) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        )
        self.output: list[str] = []
        self.addr = self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = _LISTEN_LINE.search(line)
            if match:
                return f"{match.group(1)}:{match.group(2)}"
        self.kill()
        raise RuntimeError(f"{self.args} did not start:\n{''.join(self.output)}")

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# broker.conf lines for test brokers: small store files. The defaults (1 GiB commit-log segments
# reserved up front, a 420 MB index) would fill the disk over a suite of short-lived brokers.
SMALL_STORE_CONF = (
    "mappedFileSizeCommitLog=8388608\nmappedFileSizeConsumeQueue=120000\n"
    "maxHashSlotNum=20000\nmaxIndexNum=80000\n"
)


def small_store_config(**overrides):
    """A ``MessageStoreConfig`` with small files, for tests that run a store in-process."""
    from broker.store.store_config import MessageStoreConfig

    values = {
        "mapped_file_size_commit_log": 8 * 1024 * 1024,
        "mapped_file_size_consume_queue": 6000 * 20,
        "max_hash_slot_num": 20_000,
        "max_index_num": 80_000,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)


def wait_until(predicate, timeout: float = 60, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it answers something true or ``timeout`` passes; that answer, or
    the last one, is returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = predicate()
        if answer:
            return answer
        time.sleep(interval)
    return predicate()


def keep_draining(process: EngineProcess) -> EngineProcess:
    """Keep reading a started process's output into ``process.output``: the harness stops
    reading once the process is up, and a chatty process must never block on a full pipe."""

    def pump() -> None:
        for line in process.proc.stdout:
            process.output.append(line)

    threading.Thread(target=pump, daemon=True).start()
    return process
