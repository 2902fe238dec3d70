"""The console's web tier on two processes (issue 24, item 2): two daphne processes on one Redis
channel layer and one PostgreSQL database, a Celery worker on the same Redis, a name server and a
broker, all on loopback; started and stopped as one stack.

The stack is the browser tests' ``Stack`` (same environment, migrate, first admin, logs) with a
second web process, on a Redis database of its own (``tests.redis_claims``), released at the end.
"""

from __future__ import annotations

import os
import secrets
import urllib.request
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from broker.local_cluster import ROOT, celery_command, console_web_command, free_port, wait_until
from tests.browser.stack import PG_URL, Stack, _pg_execute
from tests.cluster import OPS, start
from tests.redis_claims import REDIS_URL, claim_redis_db


@dataclass
class WebTier(Stack):
    backend: str = "two-web-processes"
    web_urls: list[str] = field(default_factory=list)

    def start(self) -> WebTier:
        cluster = start(OPS, self.workdir, brokers=("broker-ops",))
        self.engines.append(cluster)
        self.namesrv_addr = cluster.namesrv_addr
        self.password = secrets.token_urlsafe(12)
        self.database = f"scaleout_web_{secrets.token_hex(4)}"
        _pg_execute(f'CREATE DATABASE "{self.database}"')
        self.redis_db = claim_redis_db()
        self.env = {
            **self._base_env(),
            "DATABASE_URL": PG_URL.format(name=self.database),
            "REDIS_URL": REDIS_URL.format(db=self.redis_db),
        }
        self._manage("migrate", "--noinput")
        self._manage("ensure_admin")
        for index in (1, 2):
            port = free_port()
            self.web_urls.append(f"http://127.0.0.1:{port}")
            self._spawn(f"web{index}", console_web_command(port))
        self._spawn("worker", celery_command("worker", "-l", "info", "--concurrency", "2"))
        self.web_url = self.web_urls[0]
        for url in self.web_urls:
            wait_until(partial(self._serves, url), timeout=60, interval=0.2, what=f"the web process at {url}")
        return self

    def _base_env(self) -> dict:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "CONSOLE_VAR_DIR": str(self.workdir / "var"),
            "BROKER_NAMESRV": self.namesrv_addr,
            "CONSOLE_ADMIN_PASSWORD": self.password,
        }
        for name in ("DATABASE_URL", "REDIS_URL", "CONSOLE_PORT"):
            env.pop(name, None)
        return env

    def _serves(self, url: str) -> bool:
        for name, process, _ in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.log(name)[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False


def start_web_tier(workdir: Path) -> WebTier:
    tier = WebTier(workdir)
    try:
        return tier.start()
    except BaseException:
        tier.stop()
        raise
