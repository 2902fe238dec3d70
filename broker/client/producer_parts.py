"""Producer building blocks until ``latency.py``, ``batch.py`` and ``selector.py`` land:
latency fault tolerance, the batch splitter and two queue selectors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from broker.common.batch_codec import encode_batch
from broker.common.java_hash import java_string_hash
from broker.common.message import Message
from broker.remoting.codes import ResponseCode

from .errors import MQClientError
from .message_queue import MessageQueue

MAX_MESSAGE_SIZE = 4 * 1024 * 1024
# Latency thresholds (ms) and how long a broker that hit them is avoided (RocketMQ's defaults).
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.unavailable_until: dict[str, float] = {}

    def update(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        latency = 30_000 if isolation else latency_ms
        duration = 0
        for threshold, pause in zip(reversed(LATENCY_MAX), reversed(NOT_AVAILABLE_MS), strict=True):
            if latency >= threshold:
                duration = pause
                break
        self.unavailable_until[broker_name] = self.clock() + duration / 1000

    def is_available(self, broker_name: str) -> bool:
        return self.clock() >= self.unavailable_until.get(broker_name, 0)


def split_batches(messages: list[Message], limit: int = MAX_MESSAGE_SIZE) -> list[list[Message]]:
    """Cut a list into batches whose encoded size stays within ``limit`` (one topic, no delay)."""
    if not messages:
        raise MQClientError("the batch is empty", ResponseCode.MESSAGE_ILLEGAL)
    topic = messages[0].topic
    batches, current, size = [], [], 0
    for msg in messages:
        if msg.topic != topic:
            raise MQClientError(
                "all messages of a batch must have the same topic", ResponseCode.MESSAGE_ILLEGAL
            )
        if msg.delay_time_level > 0:
            raise MQClientError("delayed messages cannot be batched", ResponseCode.MESSAGE_ILLEGAL)
        item = len(encode_batch([msg])) + 64  # room for the unique id added before sending
        if item > limit:
            raise MQClientError(
                f"a message of {item} bytes exceeds the batch limit {limit}", ResponseCode.MESSAGE_ILLEGAL
            )
        if size + item > limit and current:
            batches.append(current)
            current, size = [], 0
        current.append(msg)
        size += item
    batches.append(current)
    return batches


def hash_selector(queues: list[MessageQueue], msg: Message, arg) -> MessageQueue:
    """Same argument (an order id), same queue: ordered messages per key."""
    key = java_string_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(key) % len(queues)]


def random_selector(queues: list[MessageQueue], msg: Message, arg) -> MessageQueue:
    return random.choice(queues)
