"""Broker subcommands: brokerStatus, getBrokerConfig, updateBrokerConfig, purgeDamagedCommitLog."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, add_target, require_target
from broker.cli_commands.output import CommandOutput
from broker.client.admin import MQAdmin


def _configure_status(parser: argparse.ArgumentParser) -> None:
    add_target(parser, "fetch runtime data")


def _run_status(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    addrs = admin.resolve_all_addrs(args.broker_addr, args.cluster)
    tables = {addr: admin.broker_runtime_info(addr) for addr in addrs}
    width = max((len(k) for table in tables.values() for k in table), default=0)
    lines: list[str] = []
    for addr, table in tables.items():
        # With several brokers each line names its broker, as RocketMQ's -c output does.
        prefix = f"{addr:<24} " if len(tables) > 1 else ""
        lines.extend(f"{prefix}{key:<{width}}: {value}" for key, value in table.items())
        if table.get("commitLogDamagedRanges", "0") != "0":
            lines.append(
                f"{prefix}ERROR: {table['commitLogDamagedRanges']} damaged commit-log range(s), "
                f"{table.get('commitLogDamagedBytes', '?')} bytes, quarantined (commitLogDamagedDetail); "
                "remove them with purgeDamagedCommitLog"
            )
    return CommandOutput({"brokers": tables}, "\n".join(lines))


def _configure_purge(parser: argparse.ArgumentParser) -> None:
    # One broker at a time: overwriting data is never done cluster-wide by one flag.
    parser.add_argument(
        "-b", "--brokerAddr", dest="broker_addr", required=True, help="broker address (host:port)"
    )
    parser.add_argument(
        "-f", "--fromOffset", dest="from_offset", type=int, default=None,
        help="purge only the quarantined range starting at this commit-log offset (default: every open one)",
    )  # fmt: skip


def _run_purge(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    purged = admin.purge_damaged_commit_log(args.broker_addr, args.from_offset)
    lines = [
        f"purged {r.to_offset - r.from_offset} bytes at {r.from_offset}-{r.to_offset} "
        f"in {r.segment} ({r.reason})"
        for r in purged
    ]
    text = "\n".join(lines) if lines else f"no damaged commit-log data quarantined on {args.broker_addr}"
    return CommandOutput({"broker": args.broker_addr, "purged": purged}, text)


def _configure_get(parser: argparse.ArgumentParser) -> None:
    add_target(parser, "read the config")


def _run_get(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    addrs = admin.resolve_all_addrs(args.broker_addr, args.cluster)
    states = {addr: admin.broker_config_state(addr) for addr in addrs}
    blocks = []
    for addr, state in states.items():
        width = max((len(k) for k in state.values), default=0)
        lines = []
        for key, value in state.values.items():
            line = f"{key:<{width}} = {value}"
            if key in state.pending:
                line += f"   (needs restart: {state.pending[key]} pending)"
            lines.append(line)
        blocks.append(f"============{addr}============\n" + "\n".join(lines))
    data = {
        "brokers": {addr: state.values for addr, state in states.items()},
        "pending_restart": {addr: state.pending for addr, state in states.items()},
    }
    return CommandOutput(data, "\n\n".join(blocks))


def _configure_update(parser: argparse.ArgumentParser) -> None:
    add_target(parser, "update the config")
    parser.add_argument(
        "-a", "--updateAllBroker", dest="all_brokers", action="store_true", help="with -c, slaves too"
    )
    parser.add_argument("-k", "--key", required=True, help="config key")
    parser.add_argument("-v", "--value", required=True, help="config value")


def _run_update(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    if args.all_brokers:
        addrs = admin.resolve_all_addrs(args.broker_addr, args.cluster)
    else:
        addrs = admin.resolve_masters(args.broker_addr, args.cluster)
    # The broker's remark says whether the value applies now or after a restart.
    remarks = {addr: admin.update_broker_config(addr, {args.key: args.value}) for addr in addrs}
    text = "\n".join(
        f"update broker config success, {addr}" + (f": {remark}" if remark else "")
        for addr, remark in remarks.items()
    )
    data = {"brokers": addrs, "key": args.key, "value": args.value, "remarks": remarks}
    return CommandOutput(data, text)


COMMANDS = [
    Command(
        "brokerStatus",
        "Show a broker's runtime data (versions, TPS, offsets, disk).",
        _configure_status,
        _run_status,
    ),
    Command(
        "getBrokerConfig",
        "Show the config of a broker or of every broker of a cluster.",
        _configure_get,
        _run_get,
    ),
    Command(
        "purgeDamagedCommitLog",
        "Overwrite a broker's quarantined damaged commit-log data (all, or the range at -f).",
        _configure_purge,
        _run_purge,
    ),
    Command(
        "updateBrokerConfig",
        "Change one broker config key (at once, or after a restart).",
        _configure_update,
        _run_update,
    ),
]
