"""Message trace subcommand: queryMsgTraceById."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, UsageError
from broker.cli_commands.output import CommandOutput, format_millis, render_table
from broker.client.admin import MQAdmin
from broker.client.errors import NotFoundError
from broker.client.trace import query_message_trace
from broker.common.topic_config import TRACE_TOPIC


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the client msgId of the message")
    parser.add_argument(
        "-t",
        "--traceTopic",
        dest="trace_topic",
        default=TRACE_TOPIC,
        help=f"trace topic (default {TRACE_TOPIC})",
    )


def _run(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    msg_id = args.msg_id.strip()
    if not msg_id:
        raise UsageError("-i needs a message id")
    events = query_message_trace(admin, msg_id, args.trace_topic)
    if not events:
        raise NotFoundError(f"no trace of message {msg_id} in {args.trace_topic}")
    rows = [
        (
            e.event,
            e.group,
            e.record.client_host,
            e.record.topic,
            format_millis(e.record.timestamp),
            e.record.cost_time,
            "success" if e.record.success else "failed",
            e.record.retry_times,
        )
        for e in events
    ]
    table = render_table(
        ("#Event", "#Group", "#Client", "#Topic", "#Time", "#CostTimes", "#Status", "#RetryTimes"), rows
    )
    return CommandOutput({"msg_id": msg_id, "events": [e.to_json() for e in events]}, table)


COMMANDS = [
    Command(
        "queryMsgTraceById",
        "Show a message's trace (send, consume, retry, DLQ) in time order.",
        _configure,
        _run,
    ),
]
