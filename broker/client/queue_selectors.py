"""Message queue selectors for ``Producer.send(msg, selector=..., arg=...)`` (RocketMQ's
MessageQueueSelector implementations)."""

from __future__ import annotations

import random

from broker.common.java_hash import java_string_hash
from broker.common.message import Message
from broker.common.message_queue import MessageQueue


def hash_selector(queues: list[MessageQueue], msg: Message, arg) -> MessageQueue:
    """Same argument (an order id), same queue: ordered messages per key."""
    key = java_string_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(key) % len(queues)]


def random_selector(queues: list[MessageQueue], msg: Message, arg) -> MessageQueue:
    return random.choice(queues)
