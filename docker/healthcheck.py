"""The probes of compose.yaml's health checks: each asks the process a real question.

    healthcheck.py namesrv HOST:PORT      the name server answers GET_BROKER_CLUSTER_INFO
    healthcheck.py broker HOST:PORT       the broker answers GET_BROKER_RUNTIME_INFO
    healthcheck.py controller HOST:PORT   the controller answers CONTROLLER_GET_METADATA_INFO
    healthcheck.py http URL               the URL answers 200 (the console's /healthz, Spark's UIs)
    healthcheck.py celery-worker NAME     the Celery worker NAME answers a ping over the broker
    healthcheck.py pidfile PATH           the process named in PATH runs (Celery beat)

Exit 0 when healthy, 1 with the reason on stderr otherwise (what docker/podman show in
`inspect`). Run by docker/entrypoint.sh (`healthcheck …`), in the container or on a host.
"""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.request
from pathlib import Path

TIMEOUT_S = 5.0


def remoting(addr: str, code: int) -> None:
    from broker.common.codes import ResponseCode
    from broker.remoting.client import RemotingClient
    from broker.remoting.command import create_request

    async def ask() -> None:
        client = RemotingClient()
        try:
            response = await asyncio.wait_for(client.invoke(addr, create_request(code)), TIMEOUT_S)
        finally:
            await client.close()
        if response.code != ResponseCode.SUCCESS:
            raise SystemExit(f"{addr}: request {code} answered {response.code} {response.remark or ''}")

    asyncio.run(ask())


def http(url: str) -> None:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        if response.status != 200:
            raise SystemExit(f"{url}: HTTP {response.status}")


def celery_worker(name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from project.celery import app

    replies = app.control.ping(destination=[name], timeout=TIMEOUT_S)
    if not any(name in reply for reply in replies):
        raise SystemExit(f"celery worker {name}: no answer to ping")


def pidfile(path: str) -> None:
    try:
        pid = int(Path(path).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: no running process ({exc})") from None


def main(argv: list[str]) -> None:
    from broker.common.codes import RequestCode

    probes = {
        "namesrv": lambda a: remoting(a, RequestCode.GET_BROKER_CLUSTER_INFO),
        "broker": lambda a: remoting(a, RequestCode.GET_BROKER_RUNTIME_INFO),
        "controller": lambda a: remoting(a, RequestCode.CONTROLLER_GET_METADATA_INFO),
        "http": http,
        "celery-worker": celery_worker,
        "pidfile": pidfile,
    }
    if len(argv) != 2 or argv[0] not in probes:
        raise SystemExit(f"usage: healthcheck.py {{{'|'.join(probes)}}} TARGET")
    try:
        probes[argv[0]](argv[1])
    except SystemExit:
        raise
    except Exception as exc:  # any failure is "unhealthy", said in one line
        raise SystemExit(f"{argv[0]} {argv[1]}: {type(exc).__name__}: {exc}") from None


if __name__ == "__main__":
    main(sys.argv[1:])
