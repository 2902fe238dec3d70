"""Every service of docker/compose.yaml, started as a local process with its compose command and
environment (tests/docker/compose_local.py says what is moved onto loopback), becomes healthy by
its compose health check's own probe; the bootstrap service prints how to log in; the stack is
the one compose describes (two broker sets on two name servers, a Spark worker on its master, the
front-end assets served by both consoles).

Slow (about a minute on 2 busy cores: two JVMs, four Django processes and five engines start).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest

from broker.local_cluster import wait_until
from tests.docker.compose_local import LocalService, LocalStack, load_compose
from tests.redis_claims import REDIS_URL, claim_redis_db, release_redis_db

pytestmark = pytest.mark.slow

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/{name}"
HEALTHY_WITHIN_S = 180


def _pg_execute(statement: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(statement)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    workdir: Path = tmp_path_factory.mktemp("compose")
    password = secrets.token_urlsafe(12)
    compose = load_compose(
        {
            "POSTGRES_PASSWORD": "unused-here",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "CONSOLE_ADMIN_PASSWORD": password,
        }
    )
    database = f"compose_local_{secrets.token_hex(4)}"
    _pg_execute(f'CREATE DATABASE "{database}"')
    redis_db = claim_redis_db()
    local = LocalStack(compose, workdir, PG_URL.format(name=database), REDIS_URL.format(db=redis_db))
    services: dict[str, LocalService] = {}
    started = time.monotonic()
    try:
        for name in local.runnable():
            service = local.service(name)
            services[name] = service
            service.start()
            if name == "bootstrap":  # the services that depend on it wait for it to finish
                assert service.process is not None
                service.process.wait(HEALTHY_WITHIN_S)
        yield {"services": services, "password": password, "started": started, "local": local}
    finally:
        for service in reversed(list(services.values())):
            service.stop()
        _pg_execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        release_redis_db(redis_db)


def test_bootstrap_migrates_and_prints_how_to_log_in(stack):
    bootstrap = stack["services"]["bootstrap"]
    assert bootstrap.exited() == 0, bootstrap.log_tail()
    log = bootstrap.log.read_text()
    assert "Created console admin." in log
    assert "URL:      http://127.0.0.1:8001/" in log
    assert "User:     admin" in log


def wait_healthy(stack) -> None:
    """Until every service with a health check passes it (once per module; each test calls it, so
    each also passes alone)."""
    if stack.get("healthy_after") is not None:
        return
    waiting = {name: s for name, s in stack["services"].items() if s.probe is not None}

    def all_healthy() -> bool:
        for name, service in list(waiting.items()):
            assert service.exited() is None, f"{name} exited:\n{service.log_tail()}"
            if service.healthy():
                del waiting[name]
        return not waiting

    try:
        wait_until(all_healthy, timeout=HEALTHY_WITHIN_S, interval=1.0, what="every service's health check")
    except AssertionError as exc:
        tails = "\n\n".join(f"== {name}\n{s.log_tail()}" for name, s in waiting.items())
        raise AssertionError(f"{exc}; not healthy: {sorted(waiting)}\n{tails}") from None
    stack["healthy_after"] = time.monotonic() - stack["started"]


def test_every_service_becomes_healthy_by_its_compose_probe(stack):
    probed = {name for name, s in stack["services"].items() if s.probe is not None}
    assert probed == {
        "namesrv-1", "namesrv-2", "controller", "broker-a-0", "broker-a-1", "broker-b-0",
        "web-1", "web-2", "worker", "beat", "spark-master", "spark-worker",
    }  # fmt: skip
    wait_healthy(stack)
    print(f"all healthy {stack['healthy_after']:.1f} s after the first start")


def test_two_broker_sets_on_both_name_servers(stack):
    wait_healthy(stack)
    services = stack["services"]
    for namesrv in ("namesrv-1", "namesrv-2"):
        addr = services[namesrv].probe[-1]  # the probe's address: where this name server listens

        def both_sets(addr=addr) -> str | None:
            out = subprocess.run(
                ["mqadmin", "clusterList", "-n", addr],
                env=services["worker"].env,
                capture_output=True,
                text=True,
            ).stdout
            return out if "broker-a" in out and "broker-b" in out else None

        listing = wait_until(both_sets, timeout=60, interval=1.0, what=f"broker-a and broker-b on {namesrv}")
        # broker-a has a master (the controller elected one of its two brokers) and a slave.
        broker_a = [line for line in listing.splitlines() if "broker-a" in line]
        assert len(broker_a) == 2, listing


def test_spark_worker_registered_with_the_master(stack):
    wait_healthy(stack)
    url = stack["services"]["spark-master"].probe[-1]

    def alive_workers() -> int:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response).get("aliveworkers", 0)

    assert wait_until(alive_workers, timeout=60, interval=1.0, what="a worker on the Spark master") == 1


def test_both_consoles_serve_the_npm_built_assets(stack):
    wait_healthy(stack)
    for web in ("web-1", "web-2"):
        base = stack["services"][web].probe[-1].removesuffix("healthz")
        with urllib.request.urlopen(base + "static/vendor/htmx.js", timeout=10) as response:
            assert response.status == 200
            assert b"htmx" in response.read(4096)
