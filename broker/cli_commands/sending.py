"""sendMessage's plumbing: the SDK ``Producer`` on a chosen queue, its errors named as a failed send."""

from __future__ import annotations

import random

from broker.client.admin import MQAdmin
from broker.client.errors import MQClientError, NotFoundError
from broker.client.producer import Producer, SendResult
from broker.common.message import Message
from broker.common.message_queue import MessageQueue
from broker.common.route import TopicRouteData

TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"


def choose_queue(route: TopicRouteData, broker_name: str, queue_id: int | None) -> MessageQueue:
    """``-b`` (and ``-i``) as a queue: checked against the route so a typo gets a clear error."""
    queues = [q for q in route.writable_queues() if q.broker_name == broker_name]
    if not queues:
        raise NotFoundError(f"broker {broker_name!r} has no writable queue of topic {route.topic!r}")
    if queue_id is None:
        return random.choice(queues)
    if not 0 <= queue_id < len(queues):
        raise MQClientError(
            f"queue {queue_id} does not exist on {broker_name} (write queues 0..{len(queues) - 1})"
        )
    return queues[queue_id]


def send_with_producer(admin: MQAdmin, message: Message, queue: MessageQueue | None) -> SendResult:
    if not admin.namesrv_addrs:
        raise MQClientError("no name server address given (use -n host:port or set NAMESRV_ADDR)")
    producer = Producer(TOOLS_PRODUCER_GROUP, ";".join(admin.namesrv_addrs)).start()
    try:
        return producer.send(message, queue)
    except MQClientError as exc:
        raise MQClientError(f"send failed: {exc}") from None
    finally:
        producer.shutdown()
