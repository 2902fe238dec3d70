"""The stack as ``make run-ha`` starts it: ``Procfile.ha``'s lines, each run by a shell, in a temp
var dir — a controller and the two brokers of one broker set in controller mode, their conf files
created on first start.

As with ``MakeRunStack``, only the ports differ. The name server and the brokers get ``-p``
appended to their lines. The controller's ports are in its controller.conf (its Raft port has no
command-line switch), so the stack creates that file first with the same command the Procfile line
runs, and moves its two ports to free ones (the file is the operator's to edit); the brokers'
files, created by their own lines, then name the controller's port as make run-ha's would.
broker1 starts first and is master once the controller has elected it; broker2 joins as slave.
"""

from __future__ import annotations

import asyncio
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from broker.client.admin import MQAdmin
from broker.controller.client import ControllerClient, ControllerError
from broker.local_cluster import ROOT, free_port, wait_until
from tests.browser.make_run_stack import MakeRunStack

REPLICAS = ("broker1", "broker2")
ENGINE = ("namesrv", "controller", *REPLICAS)


@dataclass
class HaStack(MakeRunStack):
    backend: str = "make-run-ha"
    procfile: Path = ROOT / "Procfile.ha"
    controller_addr: str = ""
    addrs: dict[str, str] = field(default_factory=dict)  # broker1/broker2 -> host:port

    def start(self, processes: tuple[str, ...] = ENGINE) -> HaStack:
        self.addrs = {name: f"127.0.0.1:{free_port()}" for name in REPLICAS}
        super().start(tuple(name for name in processes if name not in ("controller", *REPLICAS)))
        if "controller" in processes:
            self._write_controller_conf()
            self.spawn("controller")
            self.wait_for_log("controller", f"listening on {self.controller_addr}", 60)
        for name in REPLICAS:
            if name in processes:
                self.spawn(name)
                self.wait_for_log(name, f"listening on {self.addrs[name]}", 60)
                if name == REPLICAS[0]:

                    def is_master(n: str = name) -> bool:
                        return self.master() == n

                    wait_until(is_master, timeout=60, interval=0.2, what=f"{name} master")
        return self

    def _write_controller_conf(self) -> None:
        self._manage("ensure_broker_conf", "--controller")
        conf = self.var_dir / "controller.conf"
        port, raft = free_port(), free_port()
        text = re.sub(r"(?m)^listenPort=\d+$", f"listenPort={port}", conf.read_text())
        text = re.sub(r"(?m)^(controllerDLegerPeers=n0-127\.0\.0\.1):\d+$", rf"\g<1>:{raft}", text)
        conf.write_text(text)
        self.controller_addr = f"127.0.0.1:{port}"

    def master(self) -> str | None:
        """Which of broker1/broker2 the name server lists as the set's master (brokerId 0)."""
        with MQAdmin(self.namesrv_addr) as admin:
            brokers = admin.cluster_info().brokers
        addr = brokers["broker-a"].broker_addrs.get(0) if "broker-a" in brokers else None
        return next((name for name, a in self.addrs.items() if a == addr), None)

    def in_sync(self) -> frozenset[int]:
        """The controller's in-sync set of broker-a (controller ids), empty while it cannot say."""

        async def ask() -> frozenset[int]:
            client = ControllerClient([self.controller_addr])
            try:
                return (await client.replica_info("broker-a")).sync_state_set
            finally:
                await client.close()

        try:
            return asyncio.run(ask())
        except ControllerError:
            return frozenset()

    def kill(self, name: str) -> None:
        """SIGKILL one process (the shell exec'd it: the pid is the engine's) and forget it."""
        for entry in list(self.processes):
            if entry[0] == name:
                _, process, log = entry
                process.send_signal(signal.SIGKILL)
                process.wait(30)
                log.close()
                self.processes.remove(entry)
                return
        raise KeyError(name)

    def stop(self) -> None:
        # The slave before its master, the master before the controller: a master stopped after
        # its controller would wait out its lease rather than step down at once.
        running = {name for name, process, _ in self.processes if process.poll() is None}
        try:
            master = self.master() if "namesrv" in running else None
        except Exception:  # stopping whatever the state: the order is a nicety
            master = None
        for name in sorted(REPLICAS, key=lambda n: n == master):
            if name in running:
                self.stop_process(name)
        if "controller" in running:
            self.stop_process("controller")
        super().stop()

    def port_args(self, name: str) -> str:
        ports = {"namesrv": self.namesrv_addr, **self.addrs}
        return f" -p {ports[name].rpartition(':')[2]}" if name in ports else ""
