"""Topic subcommands: topicList, updateTopic, deleteTopic, topicRoute, topicStatus."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, add_target, parse_bool, require_target
from broker.cli_commands.output import CommandOutput, format_millis, render_assignments, render_table
from broker.client.admin import MQAdmin
from broker.client.errors import MQClientError


def _configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--clusterModel",
        dest="cluster_model",
        action="store_true",
        help="also show each topic's cluster and consumer groups",
    )


def _run_list(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    topics = admin.topic_list()
    if not args.cluster_model:
        return CommandOutput({"topics": topics}, "\n".join(topics))
    rows = []
    for topic in topics:
        clusters, groups = _topic_cluster_and_groups(admin, topic)
        rows.append({"cluster": clusters, "topic": topic, "consumer_groups": groups})
    table = render_table(
        ("#Cluster Name", "#Topic", "#Consumer Group"),
        [(",".join(r["cluster"]) or "-", r["topic"], ",".join(r["consumer_groups"]) or "-") for r in rows],
    )
    return CommandOutput({"topics": rows}, table)


def _topic_cluster_and_groups(admin: MQAdmin, topic: str) -> tuple[list[str], list[str]]:
    # A topic listed by the name server can lose its route in between (broker gone): show it
    # without details instead of failing the whole listing.
    try:
        route = admin.topic_route(topic)
        clusters = sorted({b.cluster for b in route.broker_datas})
        return clusters, admin.topic_consumed_by(topic)
    except MQClientError:
        return [], []


def _configure_update(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    add_target(parser, "create the topic")
    parser.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    parser.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    parser.add_argument(
        "-p",
        "--perm",
        type=int,
        choices=(2, 4, 6),
        default=6,
        help="permission: 2 write, 4 read, 6 read+write",
    )
    parser.add_argument("-o", "--order", type=parse_bool, default=False, help="ordered topic (true|false)")


def _run_update(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    require_target(args)
    addrs = admin.resolve_masters(args.broker_addr, args.cluster)
    for addr in addrs:
        admin.create_or_update_topic(
            addr, args.topic, args.read_queue_nums, args.write_queue_nums, args.perm, args.order
        )
    config = {
        "topicName": args.topic,
        "readQueueNums": args.read_queue_nums,
        "writeQueueNums": args.write_queue_nums,
        "perm": args.perm,
        "order": args.order,
    }
    lines = [f"create topic to {addr} success." for addr in addrs]
    lines.append(render_assignments(config))
    return CommandOutput({"brokers": addrs, "topic_config": config}, "\n".join(lines))


def _configure_delete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument(
        "-c",
        "--clusterName",
        dest="cluster",
        help="delete from this cluster's masters (default: every broker of the route)",
    )


def _run_delete(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    addrs = admin.delete_topic(args.topic, args.cluster)
    where = f"cluster [{args.cluster}]" if args.cluster else f"brokers [{', '.join(addrs)}]"
    text = (
        f"delete topic [{args.topic}] from {where} success.\n"
        f"delete topic [{args.topic}] from NameServer success."
    )
    return CommandOutput({"topic": args.topic, "brokers": addrs}, text)


def _configure_route(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")
    parser.add_argument("-l", "--list", action="store_true", help="table format (the default here)")


def _run_route(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    route = admin.topic_route(args.topic)
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    for data in route.broker_datas:
        q = queues.get(data.broker_name)
        addrs = ",".join(f"{bid}={addr}" for bid, addr in sorted(data.broker_addrs.items()))
        rows.append(
            (
                data.cluster,
                data.broker_name,
                addrs,
                q.read_queue_nums if q else 0,
                q.write_queue_nums if q else 0,
                q.perm if q else "-",
            )
        )
    total_read = sum(q.read_queue_nums for q in route.queue_datas)
    total_write = sum(q.write_queue_nums for q in route.queue_datas)
    rows.append(("Total:", len(route.broker_datas), "", total_read, total_write, ""))
    headers = ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    table = render_table(headers, rows)
    return CommandOutput(route, table)


def _configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic name")


def _run_status(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    status = admin.topic_status(args.topic)
    table = render_table(
        ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"),
        [
            (q.broker_name, q.queue_id, q.min_offset, q.max_offset, format_millis(q.last_update_timestamp))
            for q in status.queues
        ],
    )
    return CommandOutput(status, table)


COMMANDS = [
    Command("topicList", "List all topics known to the name server.", _configure_list, _run_list),
    Command(
        "updateTopic", "Create or update a topic on a broker or a cluster.", _configure_update, _run_update
    ),
    Command("deleteTopic", "Delete a topic from brokers and name servers.", _configure_delete, _run_delete),
    Command(
        "topicRoute", "Show a topic's route: brokers, addresses, queue counts.", _configure_route, _run_route
    ),
    Command(
        "topicStatus",
        "Show min/max offset and last update time of each queue.",
        _configure_status,
        _run_status,
    ),
]
