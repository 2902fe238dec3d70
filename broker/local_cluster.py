"""The engine as child processes on free loopback ports: a name server, brokers, a small cluster.

Tests and benchmarks start the engine the same way, ``python -m broker.namesrv`` and ``python -m
broker.server`` as children of the current interpreter, ready once they print ``listening on
HOST:PORT``; this module is that one launcher (it is not a test module: ``bench/`` imports it too).
The console's web and Celery processes, which tests and benchmarks start beside the engine, run the
command lines of the Procfile's ``web`` and ``worker``/``beat`` entries, written here once.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar, overload

from broker.common import fastjson
from broker.common.codes import RequestCode
from broker.common.request_headers import CommandHeader, CreateTopicRequestHeader, GetRouteInfoRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.process_ties import die_with
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.tls import ClientTls

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
_LISTEN_LINE = re.compile(r"listening on (\S+):(\d+)")

# Small store files. The defaults (1 GiB commit-log segments reserved up front, a 420 MB index)
# would fill the disk over a run of many short-lived brokers.
SMALL_STORE = {
    "mappedFileSizeCommitLog": 8388608,
    "mappedFileSizeConsumeQueue": 120000,
    "maxHashSlotNum": 20000,
    "maxIndexNum": 80000,
}


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()
_handed_out: set[int] = set()
# Set by a launcher that runs several launchers side by side (the test suite's parallel processes,
# tests/conftest.py): "LOW-HIGH", the ports this one and its children may hand out. Without it two
# processes could hand out the same port between one's probe and its server's bind.
PORT_RANGE_VARIABLE = "PYROCKET_FREE_PORT_RANGE"


def free_port_range() -> tuple[int, int]:
    """The ports ``free_port`` draws from: below the kernel's ephemeral range, or the slice of it
    given in ``PYROCKET_FREE_PORT_RANGE``."""
    low, high = max(1024, min(_EPHEMERAL_LOW, 65536) - 12_000), max(1025, _EPHEMERAL_LOW)
    given = os.environ.get(PORT_RANGE_VARIABLE, "")
    if given:
        first, _, rest = given.partition("-")
        last, _, owner = rest.partition("@")
        low, high = int(first), int(last)
        # The launcher that was given the slice draws from its lower half, the processes it starts
        # (a bench script's own cluster) from the upper: each keeps its own handed-out set, and
        # two sets drawing from one range gave a port to two servers ("address already in use").
        if owner:
            middle = (low + high) // 2
            low, high = (low, middle) if int(owner) == os.getpid() else (middle, high)
    return low, high


def port_slice(index: int, count: int) -> str:
    """The ``PYROCKET_FREE_PORT_RANGE`` value of the ``index``-th of ``count`` launchers, this
    process being the one that draws from it (its children draw from the slice's upper half)."""
    low, high = free_port_range()
    width = (high - low) // count
    return f"{low + index * width}-{low + (index + 1) * width}@{os.getpid()}"


def free_port() -> int:
    """A loopback port to listen on, below the kernel's ephemeral range.

    A port from ``bind(0)`` comes from the ephemeral range that outgoing connections also draw
    from: between this probe and the server's own bind, a client's connection could take it
    ("address already in use", seen in CI). Ports below that range are only ever taken by
    listeners. A port is handed out once per process, so two servers never get the same one; side
    by side launchers each draw from their own slice (``PYROCKET_FREE_PORT_RANGE``).
    """
    low, high = free_port_range()
    for _ in range(200):
        port = random.randrange(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as probe:  # a crowded machine: let the kernel choose
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        return int(port)


def _tie_to_launcher() -> Callable[[], None] | None:
    """The engine dies with its launcher (a parent-death signal), when started from the main
    thread: the signal follows the forking thread, and a short-lived thread's end would kill an
    engine still in use. From other threads the run's keeper (broker.process_ties) covers it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return die_with(os.getpid())


class EngineProcess:
    """A child process that prints ``... listening on HOST:PORT`` once it serves."""

    def __init__(self, args: list[str], timeout: float = 30) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
            preexec_fn=_tie_to_launcher(),
        )
        self.output: list[str] = []
        self.addr = self._wait_ready(timeout)

    @property
    def _stdout(self):  # the pipe opened in __init__, never None
        assert self.proc.stdout is not None
        return self.proc.stdout

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self._stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = _LISTEN_LINE.search(line)
            if match:
                return f"{match.group(1)}:{match.group(2)}"
        self.kill()
        raise RuntimeError(f"{self.args} did not start:\n{''.join(self.output)}")

    def keep_draining(self) -> EngineProcess:
        """Keep reading the output into ``self.output`` from now on: reading stops once the process
        is up, and a chatty process must never block on a full pipe."""

        def pump() -> None:
            for line in self._stdout:
                self.output.append(line)

        threading.Thread(target=pump, daemon=True).start()
        return self

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM and wait: a clean shutdown. The exit status (0 when clean)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def keep_draining(process: EngineProcess) -> EngineProcess:
    return process.keep_draining()


def conf_text(settings: Mapping[str, object]) -> str:
    """``key=value`` lines of a broker.conf (or namesrv.conf), in the mapping's order."""
    return "".join(f"{key}={value}\n" for key, value in settings.items())


SMALL_STORE_CONF = conf_text(SMALL_STORE)


def write_conf(path: Path, settings: Mapping[str, object]) -> Path:
    path.write_text(conf_text(settings))
    return path


def start_namesrv(conf: Path | None = None, port: int | None = None, drain: bool = True) -> EngineProcess:
    """A name server: on ``port``, else on the port of ``conf``, else on a free port."""
    args = ["-m", "broker.namesrv"]
    if conf is not None:
        args += ["-c", str(conf)]
    if port is not None or conf is None:
        args += ["--listen-port", str(port or free_port())]
    process = EngineProcess(args)
    return process.keep_draining() if drain else process


def start_broker(
    conf: Path, namesrv_addr: str | None = None, port: int | None = None, drain: bool = True
) -> EngineProcess:
    """A broker from ``conf``; ``namesrv_addr`` and ``port``, when given, override the file's."""
    args = ["-m", "broker.server", "-c", str(conf)]
    if namesrv_addr is not None:
        args += ["-n", namesrv_addr]
    if port is not None:
        args += ["--listen-port", str(port)]
    process = EngineProcess(args)
    return process.keep_draining() if drain else process


def start_controller(conf: Path, port: int | None = None, drain: bool = True) -> EngineProcess:
    """A controller (RocketMQ 5's controller mode) from ``conf``; ``port`` overrides its listenPort."""
    args = ["-m", "broker.controller", "-c", str(conf)]
    if port is not None:
        args += ["--listen-port", str(port)]
    process = EngineProcess(args)
    return process.keep_draining() if drain else process


def embedded_controller_settings(store: Path, **extra: object) -> dict[str, object]:
    """namesrv.conf lines for a name server that also runs a controller (RocketMQ's
    ``enableControllerInNamesrv``): a group of one on a free loopback Raft port, its journal in
    ``store``, a 100 ms scan for silent masters; ``extra`` adds or overrides keys."""
    return {
        "enableControllerInNamesrv": "true",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerDLegerSelfId": "n0",
        "controllerStorePath": store,
        "scanNotActiveBrokerInterval": 100,
        **extra,
    }


class LocalCluster:
    """A name server and named brokers in ``workdir``. Each broker keeps its broker.conf
    (``<workdir>/<name>.conf``) and port, so it restarts in place.

    ``namesrv_settings``: namesrv.conf lines (``<workdir>/namesrv.conf``), e.g. ``tls.server.*``;
    ``client_tls``: how ``request`` and the other helpers connect (TLS to a TLS-only cluster)."""

    def __init__(
        self,
        workdir: Path,
        cluster_name: str,
        drain: bool = True,
        namesrv_settings: Mapping[str, object] | None = None,
        client_tls: ClientTls | None = None,
    ) -> None:
        self.admin = SyncRemotingClient(tls=client_tls)  # first: bad TLS files fail before a start
        self.workdir = workdir
        self.cluster_name = cluster_name
        self.drain = drain
        if namesrv_settings:
            workdir.mkdir(parents=True, exist_ok=True)
            conf = write_conf(workdir / "namesrv.conf", namesrv_settings)
            self.namesrv = start_namesrv(conf, free_port(), drain=drain)
        else:
            self.namesrv = start_namesrv(drain=drain)
        self.brokers: dict[str, EngineProcess] = {}
        self.confs: dict[str, Path] = {}
        self.ports: dict[str, int] = {}

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker(self) -> EngineProcess:
        """The first broker (the only one of a one-broker cluster)."""
        return next(iter(self.brokers.values()))

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    def add_broker(self, name: str, settings: Mapping[str, object] | None = None) -> EngineProcess:
        """Start broker ``name`` of this cluster; ``settings`` are its broker.conf lines beyond
        its identity (and may move its store from ``<workdir>/<name>``)."""
        identity = {
            "brokerClusterName": self.cluster_name,
            "brokerName": name,
            "brokerId": 0,
            "storePathRootDir": self.workdir / name,
            # A master's replication port (listenPort + 1 by default, which is nobody's to take).
            "haListenPort": free_port(),
        }
        self.confs[name] = write_conf(self.workdir / f"{name}.conf", {**identity, **(settings or {})})
        self.ports[name] = free_port()
        return self.start_broker(name)

    def start_broker(self, name: str | None = None) -> EngineProcess:
        """(Re)start a broker added before, on its port and store."""
        name = name or next(iter(self.confs))
        process = start_broker(self.confs[name], self.namesrv_addr, self.ports[name], self.drain)
        self.brokers[name] = process
        return process

    def restart_broker(self, name: str | None = None) -> EngineProcess:
        """A clean stop (asserted) and a start on the same port and store."""
        name = name or next(iter(self.brokers))
        stopping = self.brokers[name]
        if stopping.stop() != 0:
            raise RuntimeError(f"{name} did not stop cleanly:\n{''.join(stopping.output)}")
        return self.start_broker(name)

    def request(
        self,
        code: int,
        fields: CommandHeader | Mapping[str, object] | None = None,
        body: bytes = b"",
        addr: str | None = None,
    ) -> RemotingCommand:
        """One request to ``addr`` (default: the first broker), with a typed header or, for tests
        that write a header as raw fields, a dict; its response."""
        header = fields if isinstance(fields, CommandHeader) else dict(fields) if fields else None
        request = create_request(code, header, body)
        return self.admin.invoke(addr or self.broker_addr, request)

    def create_topic(self, topic: str, queues: int = 4, wait_for_route: bool = True) -> None:
        """``topic`` with ``queues`` read and write queues on every broker, then (by default) in
        the name server's route."""
        header = CreateTopicRequestHeader(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, queues, queues, 6, "SINGLE_TAG")
        for process in self.brokers.values():
            response = self.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header, addr=process.addr)
            if not response.ok:
                raise RuntimeError(f"creating {topic} on {process.addr}: {response.remark}")
        if wait_for_route:
            self.wait_for_route(topic)

    def wait_for_route(self, topic: str, timeout: float = 15, broker_sets: int = 1) -> None:
        """Until the name server routes ``topic`` to at least ``broker_sets`` broker sets.

        A broker re-registers with the name server a moment after a topic is created, each on its
        own: a client routed before the last one has registered sends to the others only."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lookup = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic))
            answer = self.admin.invoke(self.namesrv_addr, lookup)
            if answer.ok and len(fastjson.loads(answer.body or b"{}").get("queueDatas", ())) >= broker_sets:
                return
            time.sleep(0.05)
        raise RuntimeError(f"no route of {topic} to {broker_sets} broker set(s) after {timeout} s")

    def stop(self) -> None:
        self.admin.close()
        for process in (*self.brokers.values(), self.namesrv):
            process.stop()


def start_cluster(
    workdir: Path,
    broker_names: tuple[str, ...] = ("broker-a",),
    cluster_name: str = "LocalCluster",
    settings: Mapping[str, object] | None = None,
    drain: bool = True,
) -> LocalCluster:
    """A name server and ``broker_names`` brokers, each with ``settings``; stopped again if any
    of them cannot start."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(workdir, cluster_name, drain)
    try:
        for name in broker_names:
            cluster.add_broker(name, settings)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def console_web_command(port: int) -> list[str]:
    """The console's web process on loopback ``port``, as the Procfile's ``web`` entry runs it."""
    return [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "project.asgi:application",
    ]


def celery_command(*args: str) -> list[str]:
    """``celery -A project <args>`` under this interpreter (the Procfile's worker and beat)."""
    return [sys.executable, "-m", "celery", "-A", "project", *args]


# A master and its slave (issue 22): small segments so replication crosses several, quick
# registration and HA heartbeats. ``start_master_slave`` starts the pair; the HA tests and
# bench/ha_replication.py share it.
HA_CLUSTER = "HaCluster"
MASTER_SLAVE_SETTINGS: Mapping[str, object] = {
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    **SMALL_STORE,
    "mappedFileSizeCommitLog": 1048576,
    "registerBrokerIntervalMillis": 500,
    "haSendHeartbeatInterval": 1000,
    "haHousekeepingInterval": 5000,
}
C = TypeVar("C", bound=LocalCluster)


def add_slave(
    cluster: LocalCluster, master: str, name: str, settings: Mapping[str, object] | None = None
) -> EngineProcess:
    """Start broker ``name`` as brokerId 1, brokerRole SLAVE of ``master`` (same brokerName), its
    store in ``<workdir>/<name>``; it finds its master through the name server."""
    slave = {"brokerName": master, "brokerId": 1, "brokerRole": "SLAVE"}
    return cluster.add_broker(name, {**MASTER_SLAVE_SETTINGS, **slave, **(settings or {})})


def start_master_slave(
    workdir: Path,
    with_slave: bool = True,
    master_settings: Mapping[str, object] | None = None,
    cluster_type: type[C] = LocalCluster,  # type: ignore[assignment]  # C's default
) -> C:
    """``MASTER_SLAVE_SETTINGS``: its master ``broker-ha`` (with ``master_settings``, e.g.
    brokerRole SYNC_MASTER) and, unless told not to, its slave ``broker-ha-s``."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = cluster_type(workdir, HA_CLUSTER)
    try:
        cluster.add_broker("broker-ha", {**MASTER_SLAVE_SETTINGS, **(master_settings or {})})
        if with_slave:
            add_slave(cluster, "broker-ha", "broker-ha-s")
    except BaseException:
        cluster.stop()
        raise
    return cluster


# Told ``what`` it waits for, it returns the predicate's answer or raises: never its "no" (None).
@overload
def wait_until(predicate: Callable[[], T | None], timeout: float, interval: float, what: str) -> T: ...
@overload
def wait_until(
    predicate: Callable[[], T | None], timeout: float = 60, interval: float = 0.05, *, what: str
) -> T: ...
@overload
def wait_until(
    predicate: Callable[[], T], timeout: float = 60, interval: float = 0.05, what: None = None
) -> T: ...
def wait_until(
    predicate: Callable[[], T], timeout: float = 60, interval: float = 0.05, what: str | None = None
) -> T:
    """Poll ``predicate`` (whose state lives in other processes) until it answers something true
    or ``timeout`` passes. That answer is returned; at the timeout, the last answer, or, when
    ``what`` names the awaited condition, an ``AssertionError`` saying what never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = predicate()
        if answer:
            return answer
        time.sleep(interval)
    answer = predicate()
    if not answer and what is not None:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return answer
