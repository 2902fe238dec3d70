"""The console stack as ``make run`` starts it (name server, broker, daphne web, Celery worker), on
free ports in a temp dir, on embedded defaults or on PostgreSQL + Redis.

On Redis a stack claims a database of its own (tests.redis_claims), released at the end."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.local_cluster import ROOT, celery_command, console_web_command, free_port, wait_until
from tests.cluster import OPS, start
from tests.redis_claims import REDIS_URL, claim_redis_db, release_redis_db

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/{name}"
ADMIN_USER = "admin"


@dataclass
class Stack:
    workdir: Path
    backend: str
    env: dict = field(default_factory=dict)
    processes: list = field(default_factory=list)
    engines: list = field(default_factory=list)
    database: str | None = None
    redis_db: int | None = None
    web_url: str = ""
    namesrv_addr: str = ""
    password: str = ""

    def start(self) -> Stack:
        cluster = start(OPS, self.workdir, brokers=("broker-a",))
        self.engines.append(cluster)
        self.namesrv_addr = cluster.namesrv_addr
        self.password = secrets.token_urlsafe(12)
        port = free_port()
        self.web_url = f"http://127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "CONSOLE_VAR_DIR": str(self.workdir / "var"),
            "BROKER_NAMESRV": cluster.namesrv_addr,
            "CONSOLE_ADMIN_PASSWORD": self.password,
            "CONSOLE_PORT": str(port),
        }
        self.env.pop("DATABASE_URL", None)
        self.env.pop("REDIS_URL", None)
        if self.backend == "postgres-redis":
            self.database = f"console_browser_{secrets.token_hex(4)}"
            _pg_execute(f'CREATE DATABASE "{self.database}"')
            self.env["DATABASE_URL"] = PG_URL.format(name=self.database)
            self.redis_db = claim_redis_db()
            self.env["REDIS_URL"] = REDIS_URL.format(db=self.redis_db)
        self._manage("migrate", "--noinput")
        self._manage("ensure_admin")
        self._spawn("web", console_web_command(port))
        self._spawn("worker", celery_command("worker", "-l", "info", "--concurrency", "2"))
        wait_until(self._web_ready, timeout=60, interval=0.2, what="the web process")
        return self

    def add_user(self, username: str, role: str | None) -> str:
        """A console user holding ``role`` (viewer, operator or admin; None: no role yet); returns
        its password."""
        password = secrets.token_urlsafe(12)
        code = (
            "from django.contrib.auth.models import Group, User\n"
            f"user = User.objects.create_user({username!r}, password={password!r})\n"
        )
        if role is not None:
            code += f"user.groups.add(Group.objects.get(name={role!r}))\n"
        self._manage("shell", "-c", code)
        return password

    def _manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=180,
        )

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append((name, process, log))

    def _web_ready(self) -> bool:
        for name, process, _ in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.log(name)[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.web_url}/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        try:
            self._stop_processes_and_database()
        finally:
            if self.redis_db is not None:
                release_redis_db(self.redis_db)

    def _stop_processes_and_database(self) -> None:
        for _, process, _log in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _, process, log in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            log.close()
        for engine in reversed(self.engines):
            engine.stop()
        if self.database:
            # Give the pooled connections of the stopped processes a moment to go away.
            time.sleep(0.5)
            _pg_execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


@contextmanager
def running_stack(workdir: Path, backend: str) -> Iterator[Stack]:
    """A started stack on ``backend`` ("embedded" or "postgres-redis"), stopped on exit."""
    running = Stack(workdir, backend)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _pg_execute(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)
