"""docker/compose.yaml's services as local processes: the same entry point, command, environment
and health-check probe as in the containers, with the container world moved onto this machine.

What moves, and nothing else:
- every ``<service>:<port>`` (and a service's own ``localhost:<port>``) becomes ``127.0.0.1:<free
  port>``, the port also given to the service through the ``*_PORT`` variable that set it;
  a value naming a service alone, or a service's fixed address on the compose network
  (``BROKER_IP1: 10.89.24.11``), becomes ``127.0.0.1``;
- ``/var/lib/pyrocket`` becomes a directory per service, except the shared volumes mounted below
  it (``archive``, ``reports``), which become one directory each, as the named volumes are shared;
- a conf file mounted at ``/etc/pyrocket/<name>.conf`` is read from ``docker/conf/`` instead;
- PostgreSQL and Redis are the engines at 127.0.0.1 (a database and a Redis db of the run's own):
  their services are the only ones not started from compose.yaml.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from broker.local_cluster import ROOT, free_port

DOCKER_DIR = ROOT / "docker"
COMPOSE_FILE = DOCKER_DIR / "compose.yaml"
ENTRYPOINT = DOCKER_DIR / "entrypoint.sh"
IMAGE_ENTRYPOINT = "/opt/pyrocket/docker/entrypoint.sh"
IMAGE_VAR_DIR = "/var/lib/pyrocket"
ENGINE_SERVICES = ("postgres", "redis")
CONF_TEMPLATE_VARIABLES = {
    "/etc/pyrocket/broker.conf": "BROKER_CONF_TEMPLATE",
    "/etc/pyrocket/controller.conf": "CONTROLLER_CONF_TEMPLATE",
}

_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}")


def interpolate(value: object, variables: Mapping[str, str]) -> object:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}`` in every string."""
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, operator, argument = match.groups()
        given = variables.get(name, "")
        if operator == ":?" and not given:
            raise ValueError(f"{name}: {argument}")
        return given or (argument if operator == ":-" else "")

    return _INTERPOLATION.sub(one, value)


def load_compose(variables: Mapping[str, str]) -> dict:
    """compose.yaml with its anchors merged and its variables replaced."""
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), variables)  # type: ignore[return-value]


def environment_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def start_order(services: Mapping[str, dict]) -> list[str]:
    """Services before those that depend on them (compose's own start order)."""
    order: list[str] = []

    def visit(name: str, seen: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in seen:
            raise ValueError(f"depends_on cycle through {name}")
        for dependency in services[name].get("depends_on") or []:
            visit(dependency, (*seen, name))
        order.append(name)

    for name in services:
        visit(name, ())
    return order


@dataclass
class LocalService:
    name: str
    command: list[str]
    env: dict[str, str]
    probe: list[str] | None
    log: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, wrapper: Sequence[str] = ()) -> None:
        """``wrapper``: a command that runs the entry point as its own process (it must exec it),
        e.g. ``unshare`` for a namespace of its own."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [*wrapper, str(ENTRYPOINT), *self.command],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stopping it stops its children (JVMs)
            )

    def healthy(self) -> bool:
        """The compose health check's own probe, run as the container would run it."""
        assert self.probe is not None
        result = subprocess.run(self.probe, env=self.env, capture_output=True, timeout=60)
        return result.returncode == 0

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, grace: float = 20.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class LocalStack:
    """Every compose service but the engines, placed on loopback under ``workdir``."""

    def __init__(self, compose: dict, workdir: Path, database_url: str, redis_url: str) -> None:
        self.compose = compose
        self.workdir = workdir
        self.database_url = database_url
        self.redis_url = redis_url
        self.services_def: dict[str, dict] = compose["services"]
        self.ports = self._allocate_ports()
        self.fixed_addresses = {
            network["ipv4_address"]
            for service in self.services_def.values()
            for network in (service.get("networks") or {}).values()
            if isinstance(network, dict) and "ipv4_address" in network
        }
        self.shared_dirs = self._shared_volume_dirs()

    def _allocate_ports(self) -> dict[tuple[str, str], str]:
        """(service, port in compose) -> the free loopback port it listens on here."""
        ports: dict[tuple[str, str], str] = {}
        for name, service in self.services_def.items():
            if name in ENGINE_SERVICES:
                continue
            for key, value in environment_of(service).items():
                if key.endswith("_PORT") and value.isdigit():
                    ports[(name, value)] = str(
                        self._free_port_pair() if key == "BROKER_PORT" else free_port()
                    )
        return ports

    @staticmethod
    def _free_port_pair() -> int:
        """A broker's port whose next port (its HA port, listenPort + 1) is free too."""
        import socket

        for _ in range(100):
            port = free_port()
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
        raise AssertionError("no free pair of loopback ports")

    def _shared_volume_dirs(self) -> dict[str, Path]:
        """Named volumes mounted below the var dir by several services: one directory each."""
        shared: dict[str, Path] = {}
        for service in self.services_def.values():
            for mount in service.get("volumes") or []:
                source, target = mount.split(":")[:2]
                if target.startswith(IMAGE_VAR_DIR + "/") and not source.startswith("."):
                    shared[target] = self.workdir / "volumes" / source
        return shared

    def _address(self, service: str, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            host, port = match.group(1), match.group(2)
            if host in ENGINE_SERVICES:
                return f"127.0.0.1:{port}"
            owner = service if host in ("localhost", "127.0.0.1") else host
            moved = self.ports.get((owner, port))
            return f"127.0.0.1:{moved}" if moved else match.group(0)

        return re.sub(r"(?<![\w.-])([A-Za-z0-9.-]+):(\d{2,5})\b", one, text)

    def _path(self, service: str, text: str) -> str:
        for target, directory in sorted(self.shared_dirs.items(), key=lambda item: -len(item[0])):
            text = text.replace(target, str(directory))
        return text.replace(IMAGE_VAR_DIR, str(self.workdir / "var" / service))

    def _value(self, service: str, key: str, value: str) -> str:
        if key == "DATABASE_URL":
            return self.database_url
        if key == "REDIS_URL":
            return self.redis_url
        if key.endswith("_PORT") and (service, value) in self.ports:
            return self.ports[(service, value)]
        if value in self.services_def or value in self.fixed_addresses:
            return "127.0.0.1"
        return self._path(service, self._address(service, value))

    def service(self, name: str) -> LocalService:
        definition = self.services_def[name]
        var_dir = self.workdir / "var" / name
        var_dir.mkdir(parents=True, exist_ok=True)
        for directory in self.shared_dirs.values():
            directory.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            # What the image's ENV and entry point give every container, placed here.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "APP_DIR": str(ROOT),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "BIND_HOST": "127.0.0.1",
            "CONSOLE_VAR_DIR": str(var_dir),
            "ANALYTICS_ARCHIVE_URI": self._path(name, f"{IMAGE_VAR_DIR}/archive"),
            "ANALYTICS_REPORTS_DIR": self._path(name, f"{IMAGE_VAR_DIR}/reports"),
            "PYSPARK_PYTHON": sys.executable,
        }
        for key in ("DATABASE_URL", "REDIS_URL", "SPARK_MASTER", "BROKER_NAMESRV"):
            env.pop(key, None)
        for key, value in environment_of(definition).items():
            env[key] = self._value(name, key, value)
        for mount in definition.get("volumes") or []:
            source, target = mount.split(":")[:2]
            if target in CONF_TEMPLATE_VARIABLES:
                env[CONF_TEMPLATE_VARIABLES[target]] = str((COMPOSE_FILE.parent / source).resolve())
        probe = None
        if "healthcheck" in definition:
            test = definition["healthcheck"]["test"]
            assert test[0] == "CMD", f"{name}: health check is {test[0]}, expected CMD"
            probe = [
                str(ENTRYPOINT) if arg == IMAGE_ENTRYPOINT else self._path(name, self._address(name, arg))
                for arg in test[1:]
            ]
        command = [self._path(name, self._address(name, arg)) for arg in definition["command"]]
        return LocalService(name, command, env, probe, self.workdir / f"{name}.log")

    def runnable(self) -> list[str]:
        return [name for name in start_order(self.services_def) if name not in ENGINE_SERVICES]
