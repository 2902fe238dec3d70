"""resetOffsetByTime: move a group's offsets on a topic to a point in time."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, parse_bool, parse_time_arg
from broker.cli_commands.output import CommandOutput, format_millis, render_table
from broker.client.admin import MQAdmin


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--group", required=True, help="consumer group")
    parser.add_argument("-t", "--topic", required=True, help="topic")
    parser.add_argument(
        "-s",
        "--timestamp",
        required=True,
        type=parse_time_arg,
        help="now, epoch milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS (local time)",
    )
    parser.add_argument(
        "-f",
        "--force",
        type=parse_bool,
        default=True,
        help="also move offsets forward (true, default) or only back (false)",
    )


def _run(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    entries = admin.reset_offset_by_time(args.group, args.topic, args.timestamp, args.force)
    header = (
        f"reset consumer offset of group [{args.group}] topic [{args.topic}] "
        f"to {format_millis(args.timestamp)} ({args.timestamp})"
    )
    table = render_table(
        ("#brokerName", "#queueId", "#offset"), [(e.broker_name, e.queue_id, e.offset) for e in entries]
    )
    data = {"group": args.group, "topic": args.topic, "timestamp": args.timestamp, "offsets": entries}
    return CommandOutput(data, f"{header}\n{table}")


COMMANDS = [
    Command(
        "resetOffsetByTime", "Reset a group's consume offsets on a topic to a timestamp.", _configure, _run
    )
]
