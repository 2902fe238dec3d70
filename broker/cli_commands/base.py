"""What a subcommand is, and the argument helpers the subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from broker.cli_commands.output import CommandOutput
from broker.client.admin import MQAdmin, parse_timestamp


class UsageError(Exception):
    """Arguments parsed but do not make sense together (exit code 2, like argparse's errors)."""


@dataclass(frozen=True)
class Command:
    """One mqadmin subcommand: RocketMQ's name, a one-line summary, its flags and its action."""

    name: str
    summary: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[MQAdmin, argparse.Namespace], CommandOutput]


def parse_bool(text: str) -> bool:
    """RocketMQ's tools take booleans as ``true``/``false`` values (``-s true``)."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_time_arg(text: str) -> int:
    try:
        return parse_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_target(parser: argparse.ArgumentParser, what: str) -> None:
    """``-b broker address`` or ``-c cluster name``: one of the two is required."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{what} on this broker (host:port)")
    group.add_argument("-c", "--clusterName", dest="cluster", help=f"{what} on every master of this cluster")


def require_target(args: argparse.Namespace) -> None:
    if not args.broker_addr and not args.cluster:
        raise UsageError("one of -b (broker address) or -c (cluster name) is required")
