"""The Topics page's test message: one message through the console's shared SDK producer, on a
queue the operator picked or one the producer chooses, as mqadmin sendMessage does."""

from __future__ import annotations

import random

from broker.client import Producer
from broker.client.admin import NotFoundError
from broker.client.errors import MQClientError
from broker.client.producer import SendResult
from broker.common.message import Message
from broker.common.message_queue import MessageQueue
from broker.common.topic_config import is_writeable


def choose_queue(route, broker_name: str, queue_id: int | None) -> MessageQueue:
    """A writable queue of ``broker_name`` in the topic's ``route``: ``queue_id``, checked, or one at
    random. Errors name what is missing, as the page's form shows them."""
    writable = [q for q in route.queue_datas if q.broker_name == broker_name and is_writeable(q.perm)]
    if not writable or writable[0].write_queue_nums <= 0:
        raise NotFoundError(f"broker {broker_name!r} has no writable queue of topic {route.topic!r}")
    count = writable[0].write_queue_nums
    if queue_id is None:
        queue_id = random.randrange(count)
    elif not 0 <= queue_id < count:
        raise MQClientError(f"queue {queue_id} does not exist on {broker_name} (write queues 0..{count - 1})")
    return MessageQueue(route.topic, broker_name, queue_id)


def send_message(producer: Producer, message: Message, queue: MessageQueue | None) -> SendResult:
    """Send with the SDK; its refusal is a cluster error (a failed, audited action on the page)."""
    try:
        return producer.send(message, queue)
    except MQClientError as exc:
        raise MQClientError(f"send failed: {exc}") from None
