"""Message subcommands: queryMsgById, queryMsgByKey, sendMessage, consumeMessage."""

from __future__ import annotations

import argparse
from typing import Any

from broker.cli_commands.base import Command, UsageError, parse_time_arg
from broker.cli_commands.messages_view import message_block
from broker.cli_commands.output import CommandOutput, render_table
from broker.cli_commands.sending import choose_queue, send_with_producer
from broker.client.admin import MQAdmin
from broker.client.errors import NotFoundError
from broker.common.message import Message
from broker.common.message_view import describe_message
from broker.common.route import TopicRouteData
from broker.common.system_names import TOOLS_CONSUMER_GROUP


def _configure_by_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i", "--msgId", dest="msg_id", required=True, help="offsetMsgId, or the client msgId (needs -t)"
    )
    parser.add_argument("-t", "--topic", help="topic (needed when the id is a client msgId)")


def _run_by_id(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    msg_id = args.msg_id.strip()
    # Without a topic only an offsetMsgId can be resolved (it names the store host itself).
    messages = admin.query_message_by_id(args.topic, msg_id) if args.topic else [admin.view_message(msg_id)]
    views = [describe_message(m) for m in messages]
    return CommandOutput({"messages": views}, "\n\n".join(message_block(v) for v in views))


def _configure_by_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic")
    parser.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    parser.add_argument(
        "-b",
        "--beginTimestamp",
        dest="begin",
        type=parse_time_arg,
        default=0,
        help="earliest store time (ms or yyyy-MM-dd#HH:mm:ss:SSS), default 0",
    )
    parser.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=parse_time_arg,
        default=2**63 - 1,
        help="latest store time, default no limit",
    )
    parser.add_argument("-m", "--maxNum", dest="max_num", type=int, default=64, help="at most this many")


def _run_by_key(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    messages = admin.query_message_by_key(args.topic, args.key, args.begin, args.end, args.max_num)
    views = [describe_message(m) for m in messages]
    table = render_table(
        ("#Message ID", "#QID", "#Offset"), [(v["msg_id"], v["queue_id"], v["queue_offset"]) for v in views]
    )
    return CommandOutput({"messages": views}, table)


def _configure_send(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic")
    parser.add_argument("-p", "--body", required=True, help="message body (UTF-8 text)")
    parser.add_argument("-k", "--key", help="message keys (space separated)")
    parser.add_argument("-c", "--tags", help="message tag")
    parser.add_argument("-b", "--broker", help="send to this broker name")
    parser.add_argument("-i", "--qid", type=int, help="send to this queue id (with -b)")


def _run_send(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    if args.qid is not None and not args.broker:
        raise UsageError("-i (queue id) needs -b (broker name)")
    queue = choose_queue(admin.topic_route(args.topic), args.broker, args.qid) if args.broker else None
    message = Message(topic=args.topic, body=args.body.encode("utf-8"))
    message.tags = args.tags
    message.keys = args.key
    result = send_with_producer(admin, message, queue)
    row = (result.message_queue.broker_name, result.message_queue.queue_id, result.queue_offset,
           result.send_status, result.msg_id, result.offset_msg_id)  # fmt: skip
    headers = ("#Broker Name", "#QID", "#Queue Offset", "#Send Result", "#MsgId", "#OffsetMsgId")
    data = {"send_status": result.send_status, "msg_id": result.msg_id, "offset_msg_id": result.offset_msg_id,
            "broker_name": row[0], "queue_id": row[1], "queue_offset": result.queue_offset}  # fmt: skip
    return CommandOutput(data, render_table(headers, [row]))


def _configure_consume(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic")
    parser.add_argument("-b", "--brokerName", dest="broker", help="only this broker")
    parser.add_argument("-i", "--queueId", dest="queue_id", type=int, help="only this queue (with -b)")
    parser.add_argument("-o", "--offset", type=int, help="start at this queue offset (default: the minimum)")
    parser.add_argument(
        "-c",
        "--MessageNumber",
        dest="count",
        type=int,
        default=128,
        help="print at most this many messages (default 128)",
    )
    parser.add_argument(
        "-g",
        "--consumerGroup",
        dest="group",
        default=TOOLS_CONSUMER_GROUP,
        help="group the pulls are made for (nothing is committed)",
    )
    parser.add_argument(
        "-s",
        "--beginTimestamp",
        dest="begin",
        type=parse_time_arg,
        help="start at the first message stored at or after this time",
    )
    parser.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=parse_time_arg,
        help="stop at messages stored after this time",
    )


def _run_consume(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    if args.queue_id is not None and not args.broker:
        raise UsageError("-i (queue id) needs -b (broker name)")
    if args.count <= 0:
        raise UsageError("-c must be a positive number of messages")
    views: list[dict[str, Any]] = []
    for broker_name, addr, queue_id in _queues_to_read(admin, args):
        views.extend(_read_queue(admin, args, broker_name, addr, queue_id, args.count - len(views)))
        if len(views) >= args.count:
            break
    table = render_table(
        ("#Broker Name", "#QID", "#Offset", "#MsgId", "#Tags", "#Keys", "#Body"),
        [
            (v["broker_name"], v["queue_id"], v["queue_offset"], v["msg_id"], v["tags"], v["keys"], v["body"])
            for v in views
        ],
    )
    return CommandOutput({"messages": views}, f"{table}\n\n{len(views)} message(s)")


def _read_queue(
    admin: MQAdmin, args: argparse.Namespace, broker_name: str, addr: str, queue_id: int, limit: int
) -> list[dict[str, Any]]:
    start, end = _queue_window(admin, addr, args.topic, queue_id, args)
    views: list[dict[str, Any]] = []
    for message in admin.iter_queue_messages(addr, args.topic, queue_id, start, end, args.group):
        view = describe_message(message, broker_name)
        if args.end is not None and view["store_timestamp"] > args.end:
            break
        views.append(view)
        if len(views) >= limit:
            break
    return views


def _queues_to_read(admin: MQAdmin, args: argparse.Namespace) -> list[tuple[str, str, int]]:
    route = admin.topic_route(args.topic)
    queues = []
    for mq in route.readable_queues():
        if args.broker and mq.broker_name != args.broker:
            continue
        if args.queue_id is not None and mq.queue_id != args.queue_id:
            continue
        queues.append((mq.broker_name, _read_addr(route, mq.broker_name), mq.queue_id))
    if not queues and not route.readable_queues() and route.queue_datas:
        # A DLQ is write-only until an operator makes it readable; say so rather than "no queue".
        perms = sorted({q.perm for q in route.queue_datas})
        raise NotFoundError(
            f"reading topic {args.topic!r} is forbidden by its permission (perm {perms}); "
            "make it readable with updateTopic -p 6 first"
        )
    if not queues:
        raise NotFoundError(f"topic {args.topic!r} has no such queue to read")
    return queues


def _read_addr(route: TopicRouteData, broker_name: str) -> str:
    """The broker set's master, else a slave: either serves reads."""
    data = route.broker(broker_name)
    addr = data.any_addr() if data else None
    if addr is None:
        raise NotFoundError(f"broker {broker_name!r} is not in the route of topic {route.topic!r}")
    return addr


def _queue_window(admin: MQAdmin, addr: str, topic: str, queue_id: int, args: Any) -> tuple[int, int]:
    low = admin.min_offset(addr, topic, queue_id)
    high = admin.max_offset(addr, topic, queue_id)
    if args.offset is not None:
        low = max(low, args.offset)
    elif args.begin is not None:
        low = max(low, admin.search_offset(addr, topic, queue_id, args.begin))
    return low, high


COMMANDS = [
    Command(
        "queryMsgById",
        "Show a message by offsetMsgId (or client msgId with -t).",
        _configure_by_id,
        _run_by_id,
    ),
    Command("queryMsgByKey", "Find messages by key within a time range.", _configure_by_key, _run_by_key),
    Command(
        "sendMessage", "Send one message (optionally to a chosen broker/queue).", _configure_send, _run_send
    ),
    Command(
        "consumeMessage",
        "Print messages of a topic read from the brokers (commits nothing).",
        _configure_consume,
        _run_consume,
    ),
]
