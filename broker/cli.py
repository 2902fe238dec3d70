"""``mqadmin``: RocketMQ's operator command line over ``broker.client.admin.MQAdmin``.

Exit codes: 0 done, 1 the operation failed (reason on stderr), 2 the command line was wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from broker.cli_commands import all_commands
from broker.cli_commands.base import Command, UsageError
from broker.cli_commands.output import dump_json
from broker.client.admin import MQAdmin
from broker.client.errors import MQClientError
from broker.common.acl_signature import SessionCredentials
from broker.remoting import tls as tls_env
from broker.remoting.tls import ClientTls, TlsConfigError

PROG = "mqadmin"
ACCESS_KEY_ENV, SECRET_KEY_ENV = "ROCKETMQ_ACCESS_KEY", "ROCKETMQ_SECRET_KEY"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` returns codes (and tests run in-process)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _common_flags() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        help="name server address list, host:port;host:port (default: $NAMESRV_ADDR)",
    )
    common.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    common.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each request")
    # ACL: every request is signed with this account when both keys are known. The secret is
    # better given in the environment (a command line is visible to every user of the machine).
    common.add_argument(
        "--access-key",
        dest="acl_access_key",
        metavar="KEY",
        help=f"ACL access key (default: ${ACCESS_KEY_ENV})",
    )
    common.add_argument(
        "--secret-key",
        dest="acl_secret_key",
        metavar="KEY",
        help=f"ACL secret key (default: ${SECRET_KEY_ENV})",
    )
    # TLS to name servers and brokers (tls.server.mode permissive or enforcing); each flag's
    # default is its ROCKETMQ_TLS_* variable, and any TLS flag turns TLS on.
    common.add_argument(
        "--tls", action="store_true", help=f"connect over TLS (default: ${tls_env.ENV_ENABLE})"
    )
    common.add_argument(
        "--tls-trust-cert",
        metavar="PEM",
        help=f"CAs the servers' certificates must chain to (default: ${tls_env.ENV_TRUST_CERT}, "
        "else the system's)",
    )
    common.add_argument(
        "--tls-insecure",
        action="store_true",
        help="TLS without checking the servers' certificates "
        f"(tls.test.mode.enable; default: ${tls_env.ENV_TEST_MODE})",
    )
    common.add_argument(
        "--tls-cert", metavar="PEM", help=f"client certificate (default: ${tls_env.ENV_CLIENT_CERT})"
    )
    common.add_argument(
        "--tls-key",
        metavar="PEM",
        help=f"its private key (default: ${tls_env.ENV_CLIENT_KEY}; "
        f"password: ${tls_env.ENV_CLIENT_KEY_PASSWORD})",
    )
    return common


def tls_of(args: argparse.Namespace) -> ClientTls:
    """The TLS settings: the environment's ``ROCKETMQ_TLS_*``, with the flags on top."""
    tls = ClientTls.from_env()
    flags = {
        "trust_cert_path": args.tls_trust_cert,
        "cert_path": args.tls_cert,
        "key_path": args.tls_key,
    }
    tls = dataclasses.replace(tls, **{name: value for name, value in flags.items() if value})
    if args.tls_insecure:
        tls = dataclasses.replace(tls, test_mode=True)
    if args.tls or args.tls_insecure or any(flags.values()):
        tls = dataclasses.replace(tls, enable=True)
    return tls


def credentials_of(args: argparse.Namespace) -> SessionCredentials | None:
    """The ACL account to sign with: the flags, else the environment; none when neither gives a
    key. One key without the other is a usage error (the secret itself is never echoed)."""
    access_key = args.acl_access_key or os.environ.get(ACCESS_KEY_ENV, "")
    secret_key = args.acl_secret_key or os.environ.get(SECRET_KEY_ENV, "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        missing = "--access-key" if not access_key else "--secret-key"
        env = ACCESS_KEY_ENV if not access_key else SECRET_KEY_ENV
        raise UsageError(f"ACL credentials need both keys: give {missing} or set {env}")
    return SessionCredentials(access_key, secret_key)


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="RocketMQ-style administration of name servers and brokers.")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    common = _common_flags()
    for command in commands:
        sub = subparsers.add_parser(
            command.name,
            help=command.summary,
            description=command.summary,
            parents=[common],
            prog=f"{PROG} {command.name}",
        )
        command.configure(sub)
    return parser


def help_text(commands: Sequence[Command]) -> str:
    width = max(len(c.name) for c in commands)
    lines = [f"usage: {PROG} <command> [options]", "", "The most commonly used mqadmin commands are:"]
    lines += [f"   {c.name:<{width}}  {c.summary}" for c in commands]
    lines += ["", f"See '{PROG} help <command>' for more information on a specific command."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    commands = all_commands()
    parser = build_parser(commands)
    if not args_in or args_in[0] in ("help", "-h", "--help"):
        return _help(parser, commands, args_in[1:2])
    try:
        args = parser.parse_args(args_in)
    except UsageError as exc:
        return _usage_error(args_in[0], str(exc))
    except SystemExit as exc:  # -h of a subcommand
        return int(exc.code or 0)
    by_name = {c.name: c for c in commands}
    return _execute(by_name[args.command], args)


def _help(parser: argparse.ArgumentParser, commands: Sequence[Command], topic: list[str]) -> int:
    if topic and topic[0] in {c.name for c in commands}:
        try:
            parser.parse_args([topic[0], "-h"])
        except SystemExit:
            pass
        return EXIT_OK
    if topic:
        return _usage_error("help", f"unknown command {topic[0]!r}")
    print(help_text(commands))
    return EXIT_OK


def _execute(command: Command, args: argparse.Namespace) -> int:
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR", "")
    try:
        credentials = credentials_of(args)
        with MQAdmin(namesrv, timeout=args.timeout, credentials=credentials, tls=tls_of(args)) as admin:
            output = command.run(admin, args)
    except UsageError as exc:
        return _usage_error(command.name, str(exc))
    except TlsConfigError as exc:  # a certificate file that cannot be used
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MQClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(dump_json(output.data) if args.json else output.text)
    return EXIT_OK


def _usage_error(command: str, message: str) -> int:
    where = PROG if command.startswith("-") else f"{PROG} {command}"
    print(f"{where}: error: {message}\nSee '{PROG} help' for usage.", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
