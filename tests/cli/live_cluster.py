"""A name server and two brokers as real subprocesses, for the live mqadmin tests.

Started through the engine's documented entry points (``python -m broker.namesrv --listen-port``,
``python -m broker.server -c broker.conf --listen-port -n``), each waited for until it prints
its ``listening on HOST:PORT`` line. tests/server/harness.py is the shared home of this job; this
small launcher exists because that harness had not landed when the CLI tests were written.
"""

from __future__ import annotations

import queue
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 30.0
CLUSTER = "CliCluster"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Process:
    popen: subprocess.Popen
    addr: str
    output: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start(argv: list[str], ready: re.Pattern[str], cwd: Path) -> Process:
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        for line in popen.stdout:  # type: ignore[union-attr]
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if line is None:
            break
        match = ready.search(line)
        if match:
            return Process(popen, match.group("addr"), output)
    Process(popen, "", output).stop()
    raise RuntimeError(f"{' '.join(argv)} did not start:\n{''.join(output)}")


@dataclass
class LiveCluster:
    namesrv: Process
    brokers: dict[str, Process]

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def stop(self) -> None:
        for proc in (*self.brokers.values(), self.namesrv):
            proc.stop()


def start_cluster(workdir: Path, broker_names: tuple[str, ...] = ("broker-a", "broker-b")) -> LiveCluster:
    namesrv = start(
        [sys.executable, "-m", "broker.namesrv", "--listen-port", str(free_port())],
        re.compile(r"namesrv listening on (?P<addr>\S+)"),
        workdir,
    )
    brokers: dict[str, Process] = {}
    try:
        for name in broker_names:
            conf = workdir / f"{name}.conf"
            conf.write_text(
                f"brokerClusterName={CLUSTER}\nbrokerName={name}\nbrokerId=0\n"
                f"storePathRootDir={workdir / name}\nautoCreateTopicEnable=true\n"
                "autoCreateSubscriptionGroup=true\nmapedFileSizeCommitLog=4194304\n"
            )
            argv = [
                sys.executable,
                "-m",
                "broker.server",
                "-c",
                str(conf),
                "--listen-port",
                str(free_port()),
                "-n",
                namesrv.addr,
            ]
            brokers[name] = start(
                argv, re.compile(rf"broker {re.escape(name)} listening on (?P<addr>\S+)"), workdir
            )
    except BaseException:
        LiveCluster(namesrv, brokers).stop()
        raise
    return LiveCluster(namesrv, brokers)
