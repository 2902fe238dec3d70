"""What a test's consumer received: listeners for the SDK's push consumers that keep the bodies,
and a bounded wait for what the test expects among them, or count each body's deliveries."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from broker.client import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus


class ReceivedBodies:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.changed = threading.Condition()

    def add(self, messages) -> None:
        with self.changed:
            self.bodies.extend(m.body for m in messages)
            self.changed.notify_all()

    def listener(self, messages, context):
        """A concurrent listener that takes every message."""
        self.add(messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly(self, messages, context):
        """An orderly listener that takes every message."""
        self.add(messages)
        return ConsumeOrderlyStatus.SUCCESS

    def wait_for(self, predicate: Callable[[list[bytes]], bool], timeout: float = 20.0) -> list[bytes]:
        """The bodies so far, once ``predicate`` holds for them; fails naming them after ``timeout``."""
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.bodies), timeout), self.bodies
            return list(self.bodies)


class DeliveryCounts:
    """A concurrent listener counting each body's deliveries (``seen[body]``): a redelivered
    message counts again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[bytes] = Counter()

    def listener(self, messages, context):
        with self.lock:
            self.seen.update(m.body for m in messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
