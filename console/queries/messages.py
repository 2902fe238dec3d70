"""What the message pages read: a query by topic and time range, key or id; one message with its
consumption by each group; a producer group's connections; a message's trace."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from broker.common.codes import ResponseCode
from broker.common.errors import MQBrokerError, NotFoundError
from broker.common.message_codec import MessageDecodeError, decode_offset_msg_id
from console.services import trace
from console.services.message_queries import (
    describe_all,
    message_track,
    messages_by_id,
    messages_by_key,
    messages_by_time,
)
from core.boundary import Cluster
from core.cluster_queries import topic_rows

DEFAULT_RANGE_MS = 3_600_000


def search(cluster: Cluster, mode: str, data: dict):
    """Mode ``time`` (the last hour unless a range is given), ``key`` or ``id``."""
    admin = cluster.admin
    if mode == "time":
        now = int(time.time() * 1000)
        end = int(data["end"].timestamp() * 1000) if data.get("end") else now
        begin = int(data["begin"].timestamp() * 1000) if data.get("begin") else end - DEFAULT_RANGE_MS
        return messages_by_time(admin, data["topic"], begin, end)
    if mode == "key":
        return messages_by_key(admin, data["topic"], data["key"])
    return messages_by_id(admin, data.get("topic", ""), data["msg_id"])


@dataclass(frozen=True)
class MessageDetail:
    message: Any  # the stored MessageExt
    view: Any  # what the page shows of it
    tracks: list  # its consumption by each group, with the online clients


def message_detail(cluster: Cluster, offset_msg_id: str) -> MessageDetail:
    admin = cluster.admin
    message = admin.view_cluster_message(offset_msg_id)
    [view] = describe_all(admin, [message])
    return MessageDetail(message, view, message_track(admin, message))


def sendable_topics(cluster: Cluster) -> list[str]:
    """Topics a producer group may send to (normal and FIFO)."""
    return [t.name for t in topic_rows(cluster.admin) if "normal" in t.kinds or "fifo" in t.kinds]


def producer_connection(cluster: Cluster, group: str, topic: str) -> tuple[Any, str]:
    """The group's producer connections, or the broker's words when it knows no such group."""
    try:
        return cluster.admin.producer_connection(group, topic), ""
    except MQBrokerError as exc:
        if exc.code != ResponseCode.SYSTEM_ERROR:  # RocketMQ: "the producer group not exist"
            raise
        return None, exc.remark or str(exc)


def find_message(cluster: Cluster, msg_id: str, topic: str):
    """The message itself, or None when the cluster holds no such message (an unreachable cluster
    is not "not found": its error propagates and becomes a 503 page). Without a topic only an
    offsetMsgId can be looked up; a client msgId is then found in the trace topic alone."""
    admin = cluster.admin
    try:
        if topic:
            return admin.query_message_by_id(topic, msg_id)[0]
        decode_offset_msg_id(msg_id)
        return admin.view_cluster_message(msg_id)
    except (NotFoundError, MessageDecodeError):
        return None


def timeline(cluster: Cluster, msg_id: str, message, replays: list[trace.TraceEvent]):
    return trace.timeline(cluster.admin, msg_id, message, replays)
