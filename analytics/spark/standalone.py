"""A Spark standalone cluster (one master, one worker) from the pyspark package's own ``spark-class``,
on loopback, for the scale-out tests and the decode benchmark.

No download: the pip package ships ``bin/spark-class`` and every jar the master and worker need
(``../shared/NOTES.md``). Each JVM runs in a session of its own so that stopping the cluster also
ends the executor JVMs the worker started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from broker.local_cluster import free_port, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The master starts in ~10 s and the worker registers ~10 s later on a quiet machine; a loaded
# CI machine (several test runs on 2 cores) can take a few times that.
START_TIMEOUT_S = 120


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class _Jvm:
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM to the JVM's whole session (the worker's executors too), SIGKILL if it lingers."""
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.proc.pid, signal.SIGKILL)  # anything of the session still there
        if self.proc.poll() is None:
            self.proc.wait(10)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


@dataclass
class SparkStandaloneCluster:
    """``start()`` runs a master and a worker with ``cores`` cores; ``url`` is ``spark://…``."""

    work_dir: Path
    cores: int = 2
    memory: str = "2g"
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    master: _Jvm | None = None
    worker: _Jvm | None = None

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",  # the machine's hostname may not resolve
            "SPARK_WORKER_DIR": str(self.work_dir / "work"),
        }

    def _spawn(self, name: str, *args: str) -> _Jvm:
        log = self.work_dir / f"{name}.log"
        with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                cwd=self.work_dir, env=self._env(), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        return _Jvm(proc, log)

    def master_state(self) -> dict:
        """The master's own view (its web UI's JSON): status, workers, cores, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())

    def _alive_workers(self) -> int:
        try:
            state = self.master_state()
        except OSError:
            return 0
        return int(state.get("aliveworkers", 0)) if state.get("status") == "ALIVE" else 0

    def start(self) -> SparkStandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.master = self._spawn(
                "master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                "--webui-port", str(self.master_ui_port),
            )  # fmt: skip
            self.worker = self._spawn(
                "worker", WORKER_CLASS, self.url, "--host", "127.0.0.1", "--port", str(self.worker_port),
                "--webui-port", str(self.worker_ui_port), "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(self.work_dir / "work"),
            )  # fmt: skip
            wait_until(self._registered_or_dead, START_TIMEOUT_S, 0.5, "the Spark worker to register")
            if self._alive_workers() < 1:
                raise AssertionError(f"Spark cluster did not start:\n{self.logs()}")
        except BaseException:
            self.stop()
            raise
        return self

    def _registered_or_dead(self) -> bool:
        dead = any(jvm.proc.poll() is not None for jvm in (self.master, self.worker) if jvm)
        return dead or self._alive_workers() >= 1

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{jvm.output()[-4000:]}" for name, jvm in
                         (("master", self.master), ("worker", self.worker)) if jvm)  # fmt: skip

    def stop(self) -> None:
        for jvm in (self.worker, self.master):  # the worker first: it ends its executors
            if jvm:
                jvm.stop()

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
