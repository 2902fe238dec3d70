"""Consumer-group and connection subcommands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, add_target, parse_bool, require_target
from broker.cli_commands.output import CommandOutput, format_millis, render_assignments, render_table
from broker.cli_commands.versions import version_desc
from broker.client.admin import MQAdmin

# updateSubGroup flag → SubscriptionGroupConfig option, as RocketMQ's tool maps them.
_GROUP_FLAGS = (
    ("-s", "--consumeEnable", "consume_enable", parse_bool, "consume enable (true|false)"),
    ("-m", "--consumeFromMinEnable", "consume_from_min_enable", parse_bool, "consume from min offset"),
    ("-d", "--consumeBroadcastEnable", "consume_broadcast_enable", parse_bool, "broadcast allowed"),
    ("-o", "--consumeMessageOrderly", "consume_message_orderly", parse_bool, "consume orderly"),
    ("-q", "--retryQueueNums", "retry_queue_nums", int, "retry queue count"),
    ("-r", "--retryMaxTimes", "retry_max_times", int, "max reconsume times before the DLQ"),
    ("-i", "--brokerId", "broker_id", int, "consume from which broker id"),
    (
        "-w",
        "--whichBrokerWhenConsumeSlowly",
        "which_broker_when_consume_slowly",
        int,
        "broker id when consuming slowly",
    ),
    (
        "-a",
        "--notifyConsumerIdsChanged",
        "notify_consumer_ids_changed_enable",
        parse_bool,
        "notify consumers when the group changes",
    ),
)


def _configure_update(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    add_target(parser, "create the subscription group")
    for short, long, dest, kind, text in _GROUP_FLAGS:
        parser.add_argument(short, long, dest=dest, type=kind, help=text)


def _run_update(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    options = {dest: getattr(args, dest) for _, _, dest, _, _ in _GROUP_FLAGS}
    addrs = admin.resolve_masters(args.broker_addr, args.cluster)
    config: dict = {}
    for addr in addrs:
        config = admin.create_or_update_subscription_group(addr, args.group, **options)
    lines = [f"create subscription group to {addr} success." for addr in addrs]
    lines.append(render_assignments(config))
    return CommandOutput({"brokers": addrs, "subscription_group_config": config}, "\n".join(lines))


def _configure_delete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--groupName", dest="group", required=True, help="subscription group name")
    add_target(parser, "delete the subscription group")
    parser.add_argument(
        "-r",
        "--removeOffset",
        dest="remove_offset",
        type=parse_bool,
        default=False,
        help="also remove the group's offsets (true|false)",
    )


def _run_delete(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    addrs = admin.resolve_masters(args.broker_addr, args.cluster)
    for addr in addrs:
        admin.delete_subscription_group(addr, args.group, args.remove_offset)
    text = "\n".join(f"delete subscription group [{args.group}] from broker [{a}] success." for a in addrs)
    return CommandOutput({"group": args.group, "brokers": addrs}, text)


def _configure_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--groupName", dest="group", help="consumer group (omit: every group)")
    parser.add_argument("-t", "--topicName", dest="topic", help="only this topic")


def _run_progress(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    if not args.group:
        groups = admin.consumer_groups_progress()
        table = render_table(
            ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"),
            [
                (
                    g.group,
                    g.count,
                    version_desc(g.version) if g.version is not None else "OFFLINE",
                    g.consume_type or "-",
                    g.message_model or "-",
                    g.consume_tps,
                    g.diff_total,
                )
                for g in groups
            ],
        )
        return CommandOutput({"groups": groups}, table)
    progress = admin.consumer_progress(args.group, args.topic)
    table = render_table(
        ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"),
        [
            (
                q.topic,
                q.broker_name,
                q.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.diff,
                format_millis(q.last_timestamp),
            )
            for q in progress.queues
        ],
    )
    text = f"{table}\n\nConsume TPS: {progress.consume_tps:.2f}\nConsume Diff Total: {progress.diff_total}"
    return CommandOutput(progress, text)


def _configure_consumer_conn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    parser.add_argument("-b", "--brokerAddr", dest="broker_addr", help="ask this broker")


def _run_consumer_conn(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    conn = admin.consumer_connection(args.group, args.broker_addr)
    clients = render_table(
        ("#ClientId", "#ClientAddr", "#Language", "#Version"),
        [(c.client_id, c.client_addr, c.language, version_desc(c.version)) for c in conn.connections],
    )
    subs = render_table(("#Topic", "#SubExpression"), [(s.topic, s.sub_string) for s in conn.subscriptions])
    text = (
        f"{clients}\n\nBelow is subscription:\n{subs}\n\n"
        f"ConsumeType: {conn.consume_type}\nMessageModel: {conn.message_model}\n"
        f"ConsumeFromWhere: {conn.consume_from_where}"
    )
    return CommandOutput(conn, text)


def _configure_producer_conn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group name")
    parser.add_argument("-t", "--topic", required=True, help="a topic the group sends to (locates brokers)")


def _run_producer_conn(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    conn = admin.producer_connection(args.group, args.topic)
    table = render_table(
        ("#No", "#ClientId", "#ClientAddr", "#Language", "#Version"),
        [
            (f"{i:04d}", c.client_id, c.client_addr, c.language, version_desc(c.version))
            for i, c in enumerate(conn.connections, start=1)
        ],
    )
    return CommandOutput(conn, table)


COMMANDS = [
    Command(
        "updateSubGroup", "Create or update a subscription (consumer) group.", _configure_update, _run_update
    ),
    Command("deleteSubGroup", "Delete a subscription group from brokers.", _configure_delete, _run_delete),
    Command(
        "consumerProgress",
        "Show a group's per-queue offsets and lag (or every group's total).",
        _configure_progress,
        _run_progress,
    ),
    Command(
        "consumerConnection",
        "Show a group's online consumers and subscriptions.",
        _configure_consumer_conn,
        _run_consumer_conn,
    ),
    Command(
        "producerConnection",
        "Show a producer group's online producers.",
        _configure_producer_conn,
        _run_producer_conn,
    ),
]
