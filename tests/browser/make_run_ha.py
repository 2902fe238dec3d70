"""``make run-ha`` itself, as the README's walk-through starts it: the Makefile's recipe (migrate,
ensure_admin, ``scripts/run_stack.py Procfile.ha``) run by ``make`` in a temp var dir.

Only the ports differ, so the test runs beside others and beside a real ``make run-ha``: the name
server's from ``NAMESRV_PORT`` (Procfile.ha's line reads it), the web's from ``CONSOLE_PORT``, and
the controller's and brokers' from their conf files, which the test creates first with the command
their Procfile lines run and then edits (the files are the operator's to edit; an existing one is
left as it is). ``make -o`` takes the Makefile's install stamps as they are: the test never
installs anything.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from typing import IO

from broker.local_cluster import ROOT, free_port, wait_until
from tests.browser.ha_stack import REPLICAS, HaStack

MAKE_RUN_HA = [
    "make",
    "--no-print-directory",
    "-o",
    ".venv/.installed",
    "-o",
    "static/vendor/.installed",
    "run-ha",
]
STARTED = re.compile(r"\| (\S+) started \(pid=(\d+)\)$")


@dataclass
class MakeRunHa(HaStack):
    backend: str = "make-run-ha-runner"
    make: subprocess.Popen[bytes] | None = None
    runner_log: IO[str] | None = field(default=None, repr=False)

    def start(self, processes: tuple[str, ...] = ()) -> MakeRunHa:
        """Every process of Procfile.ha, as make run-ha starts them (``processes`` is not used)."""
        self.configure()
        self.env["NAMESRV_PORT"] = self.namesrv_addr.rpartition(":")[2]
        self._write_controller_conf()
        for number, name in enumerate(REPLICAS, start=1):
            self.addrs[name] = self._write_broker_conf(number)
        self.runner_log = open(self.workdir / "runner.log", "w")  # noqa: SIM115 - closed in stop()
        # A session of its own: stop() sends SIGINT to make and the runner as a terminal's Ctrl-C
        # would; the runner's processes have sessions of their own.
        self.make = subprocess.Popen(MAKE_RUN_HA, cwd=ROOT, env=self.env, stdout=self.runner_log,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        for name in REPLICAS:
            self.wait_for_output(name, f"listening on {self.addrs[name]}", 180)
        wait_until(self._web_ready, timeout=60, interval=0.2, what="the web process")
        wait_until(lambda: self.master() in REPLICAS, timeout=60, interval=0.2, what="a master elected")
        return self

    def _write_broker_conf(self, number: int) -> str:
        """broker-ha-<number>.conf as its Procfile line creates it, moved to free ports."""
        self._manage("ensure_broker_conf", "--replica", str(number))
        conf = self.var_dir / f"broker-ha-{number}.conf"
        port = free_port()
        text = re.sub(r"(?m)^listenPort=\d+$", f"listenPort={port}", conf.read_text())
        conf.write_text(text + f"haListenPort={free_port()}\n")
        return f"127.0.0.1:{port}"

    def output(self) -> str:
        return (self.workdir / "runner.log").read_text(errors="replace")

    def wait_for_output(self, name: str, text: str, timeout: float) -> None:
        """Until a line the runner relayed from ``name`` ("system": its own) holds ``text``."""
        prefix = re.compile(rf" {re.escape(name)} +\| ")

        def seen() -> bool:
            if self.make is not None and self.make.poll() is not None:
                raise RuntimeError(f"make run-ha ended: {self.output()[-4000:]}")
            lines = self.output().splitlines()
            return any(text in line[m.end() :] for line in lines if (m := prefix.search(line)))

        wait_until(seen, timeout=timeout, interval=0.2, what=f"{name}: {text!r} in make run-ha's output")

    def pids(self) -> dict[str, int]:
        """Each process's pid as the runner last reported it (``<name> started (pid=N)``)."""
        return {m[1]: int(m[2]) for m in map(STARTED.search, self.output().splitlines()) if m}

    def kill_dash_9(self, name: str) -> int:
        """The README's ``kill -9 $(pgrep -f 'broker-ha-N.conf')``, on this stack's own file."""
        conf = self.var_dir / f"broker-ha-{REPLICAS.index(name) + 1}.conf"
        found = subprocess.run(["pgrep", "-f", str(conf)], capture_output=True, text=True, timeout=30)
        pids = [int(pid) for pid in found.stdout.split()]
        assert pids == [self.pids()[name]], (pids, self.pids())
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]

    def stop_with_ctrl_c(self, timeout: float = 120) -> int:
        """SIGINT to make and the runner, as Ctrl-C in their terminal; make's exit status."""
        assert self.make is not None
        if self.make.poll() is None:
            os.killpg(self.make.pid, signal.SIGINT)
        try:
            return self.make.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill_everything()
            raise

    def _kill_everything(self) -> None:
        for pid in [*self.pids().values(), *([self.make.pid] if self.make else [])]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.make is not None:
            self.make.wait(30)

    def stop(self) -> None:
        try:
            if self.make is not None and self.make.poll() is None:
                self.stop_with_ctrl_c()
        finally:
            if self.make is not None and self.make.poll() is None:
                self._kill_everything()
            if self.runner_log is not None:
                self.runner_log.close()
