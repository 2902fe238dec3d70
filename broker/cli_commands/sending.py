"""sendMessage's plumbing: the SDK ``Producer`` on a chosen queue, its errors as admin errors."""

from __future__ import annotations

import random

from broker.client.admin import MQAdmin, MQAdminError, NotFoundError, TopicRoute
from broker.client.errors import MQClientError
from broker.client.producer import Producer, SendResult
from broker.common.message import Message
from broker.common.message_queue import MessageQueue

TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"


def choose_queue(route: TopicRoute, broker_name: str, queue_id: int | None) -> MessageQueue:
    """``-b`` (and ``-i``) as a queue: checked against the route so a typo gets a clear error."""
    writable = [q for q in route.queue_datas if q.broker_name == broker_name and q.perm & 0x2]
    if not writable or writable[0].write_queue_nums <= 0:
        raise NotFoundError(f"broker {broker_name!r} has no writable queue of topic {route.topic!r}")
    count = writable[0].write_queue_nums
    if queue_id is None:
        queue_id = random.randrange(count)
    elif not 0 <= queue_id < count:
        raise MQAdminError(f"queue {queue_id} does not exist on {broker_name} (write queues 0..{count - 1})")
    return MessageQueue(route.topic, broker_name, queue_id)


def send_with_producer(admin: MQAdmin, message: Message, queue: MessageQueue | None) -> SendResult:
    if not admin.namesrv_addrs:
        raise MQAdminError("no name server address given (use -n host:port or set NAMESRV_ADDR)")
    producer = Producer(TOOLS_PRODUCER_GROUP, ";".join(admin.namesrv_addrs)).start()
    try:
        return producer.send(message, queue)
    except MQClientError as exc:
        raise MQAdminError(f"send failed: {exc}") from None
    finally:
        producer.shutdown()
