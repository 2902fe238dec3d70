"""``python -m broker.controller -c controller.conf [--listen-port N]``."""

from __future__ import annotations

import argparse
import logging
import sys

from broker.acl import install_acl
from broker.acl.namesrv import namesrv_acl, namesrv_replay_guard
from broker.common.conf_file import ConfError, load_conf
from broker.common.service_runner import run, serve_until_signalled

from .access import CONTROLLER_ADMIN_CODES, CONTROLLER_OPEN_READS
from .config import controller_config
from .service import ControllerService


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="controller", description="RocketMQ 5-style controller")
    parser.add_argument("-c", "--config", help="controller.conf (key=value, RocketMQ key names)")
    parser.add_argument("-p", "--listen-port", type=int, help="port (default 9878)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        conf = load_conf(args.config, {"listenPort": args.listen_port})
        config = controller_config(conf)
        # aclEnable/aclFilePath as the name server's (broker/controller/access.py says what
        # each request needs); a bad or missing file is a ConfError.
        acl = namesrv_acl(conf)
        replay = namesrv_replay_guard(conf)
        service = ControllerService(config)  # its outbound client: TLS files, the inner account
    except ConfError as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    if acl is not None:
        install_acl(
            service.server.processors,
            acl,
            admin_codes=CONTROLLER_ADMIN_CODES,
            open_codes=CONTROLLER_OPEN_READS,
            replay=replay,
        )

    async def start() -> str:
        port = await service.start()
        if acl is not None:
            acl.start_watching()
        return f"controller {config.self_id} listening on {config.listen_host}:{port}"

    async def stop() -> None:
        if acl is not None:
            acl.stop_watching()
        await service.stop()

    try:
        run(serve_until_signalled(start, stop))
    except OSError as exc:
        print(
            f"controller: cannot listen on {config.listen_host}:{config.listen_port}: {exc}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
