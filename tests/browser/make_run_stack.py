"""The stack exactly as ``make run`` starts it: each Procfile line run by a shell (as honcho does),
on embedded defaults (SQLite, Celery's filesystem transport, local Spark) in a temp var dir.

Only the ports differ, so tests run beside each other and beside a real ``make run``: the name
server and the broker get ``-p`` appended to their lines; the web line reads ``CONSOLE_PORT``.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from broker.local_cluster import ROOT, free_port, wait_until
from tests.browser.stack import Stack

# Processes of `make run` a test needs (beat only fires schedules).
PROCESSES = ("namesrv", "broker", "web", "worker")
STOP_TIMEOUT_S = 90  # SIGTERM to exit: a bound on a hang (a clean stop on a loaded machine took over 30 s)


def procfile_commands(path: Path = ROOT / "Procfile") -> dict[str, str]:
    commands = {}
    for line in path.read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not line.lstrip().startswith("#"):
            commands[name.strip()] = command.strip()
    return commands


@dataclass
class MakeRunStack(Stack):
    backend: str = "make-run"
    broker_addr: str = ""
    procfile: Path = ROOT / "Procfile"

    @property
    def var_dir(self) -> Path:
        return self.workdir / "var"

    def start(self, processes: tuple[str, ...] = PROCESSES) -> MakeRunStack:
        self.configure()
        if "web" in processes:
            self._manage("migrate", "--noinput")  # what `make run` does before honcho
            self._manage("ensure_admin")
        for name in processes:
            self.spawn(name)
        if "broker" in processes:
            self.wait_for_log("broker", f"listening on {self.broker_addr}", 60)
        if "web" in processes:
            wait_until(self._web_ready, timeout=60, interval=0.2, what="the web process")
        return self

    def configure(self) -> None:
        """Free ports, the admin's password and the environment the processes run in."""
        namesrv_port, broker_port, web_port = free_port(), free_port(), free_port()
        self.namesrv_addr = f"127.0.0.1:{namesrv_port}"
        self.broker_addr = f"127.0.0.1:{broker_port}"
        self.web_url = f"http://127.0.0.1:{web_port}"
        self.password = secrets.token_urlsafe(12)
        self.env = {
            **os.environ,
            # The Makefile puts the venv first on PATH: the Procfile's `python` and `celery`.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "CONSOLE_VAR_DIR": str(self.var_dir),
            "BROKER_NAMESRV": self.namesrv_addr,
            "CONSOLE_ADMIN_PASSWORD": self.password,
            "CONSOLE_PORT": str(web_port),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        for name in ("DATABASE_URL", "REDIS_URL", "ANALYTICS_ARCHIVE_URI", "SPARK_MASTER"):
            self.env.pop(name, None)

    def spawn(self, name: str) -> None:
        """Start the Procfile's line ``name`` (again: a restart appends to its log)."""
        log = open(self.workdir / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        command = procfile_commands(self.procfile)[name] + self.port_args(name)
        process = subprocess.Popen(["sh", "-c", command], cwd=ROOT, env=self.env, stdout=log,
                                   stderr=subprocess.STDOUT)  # fmt: skip
        self.processes.append((name, process, log))

    def port_args(self, name: str) -> str:
        """What the test appends to the Procfile line ``name``: its server's port."""
        ports = {"namesrv": self.namesrv_addr, "broker": self.broker_addr}
        return f" -p {ports[name].rpartition(':')[2]}" if name in ports else ""

    def stop_process(self, name: str) -> int:
        """SIGTERM one process (a clean stop) and forget it; its exit status."""
        for entry in list(self.processes):
            if entry[0] == name:
                _, process, log = entry
                process.send_signal(signal.SIGTERM)
                try:
                    status = process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:  # its threads' stacks (service_runner) in the failure
                    process.send_signal(signal.SIGUSR1)
                    time.sleep(2)
                    raise AssertionError(
                        f"{name} did not stop within {STOP_TIMEOUT_S} s of SIGTERM; its log ends:\n"
                        + self.log(name)[-6000:]
                    ) from None
                log.close()
                self.processes.remove(entry)
                return status
        raise KeyError(name)

    def wait_for_log(self, name: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(name):
            for other, process, _ in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{other} exited: {self.log(other)[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not log {text!r}: {self.log(name)[-3000:]}")
            time.sleep(0.2)
