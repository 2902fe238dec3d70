"""Reading the messages of a topic through the admin client's pull (no offsets committed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.client.admin import MQAdmin, NotFoundError
from broker.common.message import MessageExt
from core.cluster_queries import readable_master_queues


@dataclass(frozen=True)
class LocatedMessage:
    """A message and the broker it was read from (replays and commits go back to that broker)."""

    message: MessageExt
    broker_name: str
    broker_addr: str


def queue_ranges(admin: MQAdmin, topic: str) -> list[tuple[str, str, int, int, int]]:
    """(broker name, master address, queue id, min offset, max offset) of every readable queue;
    empty when the topic has no route (nothing was ever written to it)."""
    try:
        route = admin.topic_route(topic)
    except NotFoundError:
        return []
    ranges = []
    for queue, addr in readable_master_queues(route):
        low = admin.min_offset(addr, topic, queue.queue_id)
        high = admin.max_offset(addr, topic, queue.queue_id)
        ranges.append((queue.broker_name, addr, queue.queue_id, low, high))
    return ranges


def read_topic(
    admin: MQAdmin,
    topic: str,
    newest_per_queue: int = 1000,
    keep: Callable[[MessageExt], bool] | None = None,
) -> list[LocatedMessage]:
    """Up to ``newest_per_queue`` of the newest messages of each queue that pass ``keep``,
    newest first."""
    found: list[LocatedMessage] = []
    for broker_name, addr, queue_id, low, high in queue_ranges(admin, topic):
        start = max(low, high - newest_per_queue)
        for message in admin.iter_queue_messages(addr, topic, queue_id, start, high):
            if keep is None or keep(message):
                found.append(LocatedMessage(message, broker_name, addr))
    found.sort(key=lambda located: located.message.store_timestamp, reverse=True)
    return found


def read_queue(
    admin: MQAdmin, addr: str, broker_name: str, topic: str, queue_id: int, start: int, end: int
) -> list[LocatedMessage]:
    return [
        LocatedMessage(message, broker_name, addr)
        for message in admin.iter_queue_messages(addr, topic, queue_id, start, end)
    ]
