"""``python -m broker.server [-c broker.conf] [-n namesrv] [--listen-port N]``."""

from __future__ import annotations

import argparse
import logging
import sys

from broker.common.conf_file import ConfError
from broker.common.service_runner import run, serve_until_signalled

from .config import BrokerConfig
from .controller import BrokerController
from .slave_identity import check_before_start


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="broker", description="RocketMQ-compatible broker")
    parser.add_argument("-c", "--config", help="broker.conf (key=value, RocketMQ key names)")
    parser.add_argument("-n", "--namesrv-addr", help="name servers, ';'-separated")
    parser.add_argument("-p", "--listen-port", type=int, help="port (default 10911)")
    parser.add_argument("--store-dir", help="storePathRootDir")
    parser.add_argument("--broker-name", help="brokerName")
    return parser.parse_args(argv)


async def _serve(controller: BrokerController) -> None:
    async def start() -> str:
        port = await controller.start()
        return f"broker {controller.config.broker_name} listening on {controller.config.broker_ip1}:{port}"

    await serve_until_signalled(start, controller.stop)
    logging.getLogger(__name__).info("broker stopped cleanly")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {
        "namesrvAddr": args.namesrv_addr,
        "listenPort": args.listen_port,
        "storePathRootDir": args.store_dir,
        "brokerName": args.broker_name,
    }
    try:
        config = BrokerConfig.load(args.config, overrides)
        check_before_start(config)  # a slave of another broker set stops here, before serving
        controller = BrokerController(config)
    except (ConfError, ValueError) as exc:
        # A bad setting is the operator's to fix: name it plainly, no traceback.
        where = f" in {args.config}" if args.config else ""
        print(f"broker: bad configuration{where}: {exc}", file=sys.stderr)
        return 2
    try:
        run(_serve(controller))
    except OSError as exc:
        print(f"broker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
