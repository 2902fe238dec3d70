"""Real Celery worker processes on Redis with the console's database on PostgreSQL, for the
scale-out tests: a database made for the module and dropped after, an empty Redis database
claimed and flushed after, worker processes in sessions of their own (SIGKILL reaches their Spark JVMs),
and Celery's own task events telling which worker ran which task.

The test process reaches the PostgreSQL database through a connection alias of its own, routed to
for every model while the module runs: the run may have configured Django's ``default`` database
(SQLite) long before this module was collected.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dj_database_url
import psycopg

from broker.local_cluster import celery_command, wait_until
from tests.browser.stack import PG_URL
from tests.redis_claims import REDIS_URL, claim_redis_db, release_redis_db

if TYPE_CHECKING:
    from celery.events.receiver import EventReceiver

REPO = Path(__file__).resolve().parents[2]
POSTGRES_ADMIN_URL = PG_URL.format(name="postgres")
ALIAS = "scaleout"


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A fresh PostgreSQL database migrated by ``manage.py migrate`` (as an operator deploys);
    its URL. Dropped afterwards, whoever is still connected."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin_url = POSTGRES_ADMIN_URL
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "project.settings"}
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=REPO, env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _Everything:
    """A database router sending every model to one alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def db_for_read(self, model, **hints):
        return self.alias

    def db_for_write(self, model, **hints):
        return self.alias

    def allow_relation(self, *args, **hints):
        return True


@contextlib.contextmanager
def routed_to(url: str) -> Iterator[str]:
    """While the block runs, this process's ORM reads and writes ``url`` (alias ``ALIAS``)."""
    from django.db import DEFAULT_DB_ALIAS, connections, router

    configured = connections.configure_settings(
        {DEFAULT_DB_ALIAS: dict(connections.settings[DEFAULT_DB_ALIAS]), ALIAS: dj_database_url.parse(url)}
    )
    connections.settings[ALIAS] = configured[ALIAS]
    before = router.__dict__.get("routers")
    router.routers = [_Everything(ALIAS)]
    try:
        yield ALIAS
    finally:
        if before is None:
            router.__dict__.pop("routers", None)
        else:
            router.routers = before
        connections[ALIAS].close()
        del connections.settings[ALIAS]
        with contextlib.suppress(AttributeError):
            # django-stubs do not declare the handler's per-thread store of open connections.
            delattr(connections._connections, ALIAS)  # type: ignore[attr-defined]


@contextlib.contextmanager
def redis_database() -> Iterator[str]:
    """``redis://…/<db>`` of a Redis database claimed for the block (as the web-tier stack claims
    its own, so tests running at once never share one), released afterwards: the Celery queues,
    results and events of the block's workers."""
    db = claim_redis_db()
    try:
        yield REDIS_URL.format(db=db)
    finally:
        release_redis_db(db)


@dataclass
class CeleryWorker:
    """``celery -A project worker -n <hostname>`` with one task at a time (solo pool: a
    worker holds only the task it runs, so a killed worker takes no queued task with it)."""

    hostname: str
    env: dict
    log: Path
    queues: str = "celery"
    proc: subprocess.Popen | None = None

    def start(self) -> CeleryWorker:
        args = ["worker", "-n", self.hostname, "-Q", self.queues, "--pool", "solo", "-E", "-l", "info",
                "--without-gossip", "--without-mingle"]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                celery_command(*args), cwd=self.log.parent, env=self.env, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        ready = lambda: "ready." in self.output() or self.proc.poll() is not None  # noqa: E731
        wait_until(ready, 120, 0.5, "celery start")
        assert self.proc.poll() is None, self.output()
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def received(self, task_id: str) -> bool:
        """Whether this worker took ``task_id`` off the queue (its own log says so at once; its
        task-started event waits in the event buffer while a solo pool runs the task)."""
        return f"[{task_id}] received" in self.output()

    def kill(self) -> None:
        """SIGKILL, as the kernel's OOM killer or a lost machine would end it (its Spark JVM too)."""
        self._signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
        self._signal(signal.SIGKILL)  # whatever of its session is left (a Spark driver JVM)
        if self.proc and self.proc.poll() is None:
            self.proc.wait(30)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)


@dataclass
class TaskEvents:
    """Celery's task events (workers started with ``-E``), received from the broker: which worker
    (hostname) finished each task. (A solo pool's worker buffers its task events and sends them
    once the task is over: ``CeleryWorker.received`` tells which worker has a running task.)"""

    broker_url: str
    finished: dict[str, tuple[str, str]] = field(default_factory=dict)  # task id → (hostname, event)
    _receiver: EventReceiver | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TaskEvents:
        self._thread = threading.Thread(target=self._receive, name="celery-events", daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "the event receiver did not connect"
        return self

    def _receive(self) -> None:
        from celery import Celery

        app = Celery(broker=self.broker_url, set_as_current=False)

        def on_finished(event):
            self.finished[event["uuid"]] = (event["hostname"], event["type"])

        handlers = {"task-succeeded": on_finished, "task-failed": on_finished}
        with app.connection_for_read() as connection:
            self._receiver = receiver = app.events.Receiver(connection, handlers=handlers)
            consuming = receiver.on_consume_ready

            def ready(*args, **kwargs):  # the event queue exists: no event sent from now on is lost
                consuming(*args, **kwargs)
                self._ready.set()

            receiver.on_consume_ready = ready
            receiver.capture(limit=None, timeout=None, wakeup=False)  # until should_stop

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.should_stop = True
        if self._thread:
            self._thread.join(10)


def sender(broker_url: str):
    """A Celery app that only sends tasks by name to ``broker_url`` (the workers' Redis)."""
    from celery import Celery

    # Not the current app: shared tasks of later tests in this process would send through it.
    return Celery("scaleout-sender", broker=broker_url, backend=broker_url, set_as_current=False)


def worker_env(database_url: str, redis_url: str, **extra: str) -> dict:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings", DATABASE_URL=database_url, REDIS_URL=redis_url,
        SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        PYTHONUNBUFFERED="1", **extra,
    )  # fmt: skip
    return env
