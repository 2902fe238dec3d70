"""The name server process: ``python -m broker.namesrv [-c namesrv.conf] [--listen-port N]``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from broker.acl import install_acl
from broker.acl.namesrv import OPEN_READS, namesrv_acl, namesrv_replay_guard
from broker.acl.resources import ADMIN_CODES
from broker.common.conf_file import ConfError, get_bool, get_int, load_conf
from broker.common.service_runner import run, serve_until_signalled

from .kv_config import KVConfigManager
from .processor import NamesrvProcessor
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    from broker.controller.service import ControllerService
    from broker.remoting.server import RemotingServer

log = logging.getLogger(__name__)


class NamesrvController:
    def __init__(self, conf: dict[str, str]) -> None:
        from broker.common.connection_limits import ConnectionLimits
        from broker.remoting.server import RemotingServer
        from broker.remoting.tls import ServerTls

        self.host = conf.get("listenHost", "127.0.0.1")
        self.port = get_int(conf, "listenPort", 9876)
        self.scan_interval_ms = get_int(conf, "scanNotActiveBrokerInterval", 10_000)
        self.expired_ms = get_int(conf, "brokerChannelExpiredTime", 120_000)
        home = conf.get("kvConfigPath")
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(Path(home) if home else None)
        # tls.server.* as in broker.conf (broker/remoting/tls.py); a certificate that cannot be
        # loaded is a ConfError here, before anything listens.
        self.server = RemotingServer(
            self.host, self.port, ConnectionLimits.from_conf(conf), tls=ServerTls.from_properties(conf)
        )
        NamesrvProcessor(self.routes, self.kv).register_all(self.server)
        self.embedded_controller = _embedded_controller(conf, self.server)
        # Plain ACL (broker/acl/namesrv.py): a bad or missing file is a ConfError here.
        # Installed after the controller's processors so that they are checked too.
        self.acl = namesrv_acl(conf)
        replay = namesrv_replay_guard(conf)
        if self.acl is not None:
            admin, open_reads = ADMIN_CODES, OPEN_READS
            if self.embedded_controller is not None:
                from broker.controller.access import CONTROLLER_ADMIN_CODES, CONTROLLER_OPEN_READS

                admin, open_reads = admin | CONTROLLER_ADMIN_CODES, open_reads | CONTROLLER_OPEN_READS
            install_acl(
                self.server.processors, self.acl, admin_codes=admin, open_codes=open_reads, replay=replay
            )
        self._scanner: asyncio.Task | None = None

    async def start(self) -> int:
        self.port = await self.server.start()
        if self.embedded_controller is not None:
            await self.embedded_controller.start()
        if self.acl is not None:
            self.acl.start_watching()
        self._scanner = asyncio.create_task(self._scan_loop())
        return self.port

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_ms / 1000)
            for addr in self.routes.scan_not_active(self.expired_ms):
                log.warning("broker %s silent for over %d ms: removed from routes", addr, self.expired_ms)

    async def stop(self) -> None:
        if self._scanner:
            self._scanner.cancel()
        if self.acl is not None:
            self.acl.stop_watching()
        if self.embedded_controller is not None:
            await self.embedded_controller.stop()
        await self.server.stop()


def _embedded_controller(conf: dict[str, str], server: RemotingServer) -> ControllerService | None:
    """RocketMQ's ``enableControllerInNamesrv``: a controller on the name server's own port, its
    keys (controllerDLegerGroup/Peers/SelfId, controllerStorePath, scanNotActiveBrokerInterval,
    ...) read from namesrv.conf as controller.conf's; a bad one is a ConfError."""
    if not get_bool(conf, "enableControllerInNamesrv", False):
        return None
    from broker.controller.config import controller_config
    from broker.controller.service import ControllerService

    return ControllerService(controller_config(conf), server)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="namesrv", description="RocketMQ-compatible name server")
    parser.add_argument("-c", "--config", help="namesrv.conf (key=value, RocketMQ key names)")
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("-p", "--listen-port", type=int, help="port (default 9876)")
    return parser.parse_args(argv)


async def _serve(controller: NamesrvController) -> None:
    async def start() -> str:
        port = await controller.start()
        embedded = (
            f" (controller {controller.embedded_controller.config.self_id} embedded)"
            if controller.embedded_controller
            else ""
        )
        return f"namesrv listening on {controller.host}:{port}{embedded}"

    await serve_until_signalled(start, controller.stop)
    log.info("namesrv stopped")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {"listenPort": args.listen_port, "listenHost": args.host}
    try:
        controller = NamesrvController(load_conf(args.config, overrides))
    except ConfError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return 2
    try:
        run(_serve(controller))
    except OSError as exc:
        print(
            f"namesrv: cannot listen on {controller.host}:{controller.port}: {exc.strerror}", file=sys.stderr
        )
        return 1
    return 0
