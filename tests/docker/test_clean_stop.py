"""A broker started as docker/compose.yaml starts it stops cleanly on SIGTERM within the grace
the container engine gives it (podman and docker: 10 s, then SIGKILL), even when the name servers
went away first, as in ``podman-compose down`` (which stops every container at once).

Issue 32, 8b: a name server's container that is gone mid-lookup leaves the broker's lookups of its
name (``namesrv-1``) waiting on the resolver for many seconds (glibc: ``timeout`` x ``attempts``
per server); the broker stopped cleanly but its process waited for those lookups before exiting,
and was SIGKILLed. Here a resolver that never answers stands in for the gone name servers: the
broker runs in a mount namespace of its own whose /etc/resolv.conf names a loopback address where
a socket of this test takes the queries and answers none. Needs root (unshare, port 53).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.local_cluster import wait_until
from tests.docker.compose_local import LocalService, LocalStack, environment_of, load_compose

# What podman and docker give a container between SIGTERM and SIGKILL (compose's default
# stop_grace_period; compose.yaml sets none).
STOP_GRACE_S = 10.0
# Every lookup the broker makes waits this long on the silent resolver: longer than the grace.
RESOLVER_OPTIONS = "options timeout:30 attempts:2"
# Runs the command with the namespace's own /etc/resolv.conf ($0), as the same process (exec).
IN_NAMESPACE = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'


def _silent_resolver() -> socket.socket:
    """A UDP socket on port 53 of a loopback address that reads nothing (queries queue unanswered)."""
    for last in range(53, 80):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((f"127.0.53.{last}", 53))
        except OSError:
            sock.close()
            continue
        return sock
    raise AssertionError("no free loopback address for the silent resolver")


@pytest.fixture
def resolv_conf(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare: a mount namespace with its own /etc/resolv.conf")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --mount refused here: {probe.stderr.decode(errors='replace').strip()}")
    resolver = _silent_resolver()
    path = tmp_path / "resolv.conf"
    path.write_text(f"nameserver {resolver.getsockname()[0]}\n{RESOLVER_OPTIONS}\n")
    try:
        yield path
    finally:
        resolver.close()


@pytest.fixture
def broker_b0(tmp_path: Path) -> LocalService:
    """compose.yaml's broker-b-0 (an archiving master) as a local process, its name servers the
    compose ones by name: names no name server answers to, looked up on the silent resolver."""
    compose = load_compose({"POSTGRES_PASSWORD": "unused", "DJANGO_SECRET_KEY": "unused"})
    service = LocalStack(compose, tmp_path / "stack", "postgresql://unused", "redis://unused").service(
        "broker-b-0"
    )
    service.env["NAMESRV_ADDR"] = environment_of(compose["services"]["broker-b-0"])["NAMESRV_ADDR"]
    return service


def _start(service: LocalService, resolv: Path) -> subprocess.Popen:
    service.start(wrapper=["unshare", "--mount", "sh", "-c", IN_NAMESPACE, str(resolv)])
    assert service.process is not None
    wait_until(
        lambda: service.exited() is None and "listening on" in service.log.read_text(),
        timeout=120,
        interval=0.2,
        what=f"broker-b-0 listening (log: {service.log})",
    )
    return service.process


def _stop_within_grace(service: LocalService) -> tuple[int | None, float]:
    """SIGTERM as the engine sends it; the exit code, or None when it had to be SIGKILLed."""
    process = service.process
    assert process is not None
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code: int | None = process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        code = None
    return code, time.monotonic() - sent


def test_broker_stops_within_the_grace_when_its_name_servers_are_gone(resolv_conf, broker_b0):
    _start(broker_b0, resolv_conf)
    code, took = _stop_within_grace(broker_b0)
    log = broker_b0.log.read_text()
    assert code == 0, f"exit {code} after {took:.1f} s (None: SIGKILLed at {STOP_GRACE_S:g} s)\n{log[-3000:]}"
    assert "broker stopped cleanly" in log
    print(f"stopped in {took:.1f} s of the {STOP_GRACE_S:g} s grace")
    # The next start finds the store closed cleanly (no crash recovery).
    broker_b0.log.write_text("")
    _start(broker_b0, resolv_conf)
    try:
        assert "started (last exit clean)" in broker_b0.log.read_text()
    finally:
        code, took = _stop_within_grace(broker_b0)
    assert code == 0, f"second stop: exit {code} after {took:.1f} s\n{broker_b0.log_tail()}"
