"""The newcomer journey's traffic (issue 32, acceptance), at a bounded scale: 1,200 messages over
three topics; a keeping-up group, a slow group that stalls behind, a group with 2 retries whose
poison messages end in its DLQ; delayed messages not yet due and transactions nobody resolves.

What the journey expects to see is computed here from the test's own send results and from the
engine (the SDK's admin), never from the console.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    Producer,
    PushConsumer,
)
from broker.client.admin import MQAdmin, NotFoundError
from broker.common.message import Message
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC
from broker.local_cluster import ROOT, wait_until
from tests.cluster import send_pending_transactions

ORDERS, PAYMENTS, AUDIT = "NewcomerOrders", "NewcomerPayments", "NewcomerAudit"
SENT = {ORDERS: 600, PAYMENTS: 400, AUDIT: 200}  # 1,200 messages over three topics
QUEUES = 4
KEEPING_UP, SLOW, RETRIES = "newcomer-keeping-up", "newcomer-slow", "newcomer-retries"
GROUPS = (KEEPING_UP, SLOW, RETRIES)
SLOW_TAKES = 150  # the slow group consumes this many of PAYMENTS, then its listener stalls
POISON_EVERY = 10  # every 10th message of AUDIT fails each time: 2 retries, then the DLQ
MAX_RETRIES = 2
DELAY_LEVEL, DELAYED = 18, 10  # 2 h with the default levels: still pending when the pages look
HALF = 5  # transactions that never decide
WITHIN_S = 120  # retries are delayed by level 1 (1 s) each; the rest is immediate

SAMPLE = """
from core import cluster_access
from history import sampler
admin = cluster_access.admin_for({namesrv!r})
try:
    sampler.sample({namesrv!r}, admin)
finally:
    cluster_access.close_all()
"""


def history_sample(stack) -> None:
    """One cycle of the metric history, as the beat task runs it (beat is not started here)."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SAMPLE.format(namesrv=stack.namesrv_addr)],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Counters:
    """The broker's message counters (runtime info), as the engine reports them."""

    put: int
    got: int


def engine_counters(admin: MQAdmin, broker_addr: str) -> Counters:
    info = admin.broker_runtime_info(broker_addr)
    return Counters(int(info["msgPutTotalTodayNow"]), int(info["msgGetTotalTodayNow"]))


def steady(read, *, attempts: int = 5):
    """``read()`` while the engine's counters stay put around it: the broker's transaction checker
    re-stores pending half messages now and then (RocketMQ's putBackHalfMsg), which moves them."""
    for _ in range(attempts):
        before, value, after = read()
        if before == after:
            return before, value
    raise AssertionError(f"the engine's counters kept moving: {before} -> {after}")


@dataclass
class Journey:
    stack: object
    admin: MQAdmin
    sent: Counter = field(default_factory=Counter)  # topic -> messages stored (SEND_OK)
    consumed: Counter = field(default_factory=Counter)  # group -> messages its listener took
    delayed_ids: list[str] = field(default_factory=list)
    half_ids: list[str] = field(default_factory=list)
    poisoned: list = field(default_factory=list)  # SendResults of the messages that end in the DLQ
    consumers: list = field(default_factory=list)
    stall: threading.Event = field(default_factory=threading.Event)  # set: the slow group goes on
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def broker_addr(self) -> str:
        return self.stack.broker_addr

    # -- consumers --------------------------------------------------------------------------
    def _took(self, group: str) -> None:
        with self.lock:
            self.consumed[group] += 1

    def keeping_up(self, messages, context):
        for _ in messages:
            self._took(KEEPING_UP)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def slow(self, messages, context):
        with self.lock:
            stall = self.consumed[SLOW] >= SLOW_TAKES
        if stall:
            self.stall.wait()  # one thread: the rest waits behind this message, unconsumed
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        self.stall.wait(0.01)  # slow: about 100 messages a second at most
        self._took(SLOW)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def retrying(self, messages, context):
        if any(m.keys and m.keys[0].startswith("poison") for m in messages):
            context["delay_level_when_next_consume"] = 1  # retry after 1 s
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        for _ in messages:
            self._took(RETRIES)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def start_consumers(self) -> None:
        namesrv = self.stack.namesrv_addr
        plans = [
            (KEEPING_UP, ORDERS, self.keeping_up, {}),
            (SLOW, PAYMENTS, self.slow, {"consume_threads": 1}),
            (RETRIES, AUDIT, self.retrying, {"max_reconsume_times": MAX_RETRIES}),
        ]
        for group, topic, listener, options in plans:
            consumer = PushConsumer(
                group, namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name=group,
                persist_interval_ms=200, **options,
            )  # fmt: skip
            consumer.subscribe(topic, "*")
            consumer.register_message_listener(listener)
            self.consumers.append(consumer.start())

    def stop_consumers(self) -> None:
        self.stall.set()
        for consumer in self.consumers:
            consumer.shutdown()
        self.consumers.clear()

    # -- traffic ----------------------------------------------------------------------------
    def create_topics(self) -> None:
        for topic in SENT:
            self.admin.create_or_update_topic(self.broker_addr, topic, QUEUES, QUEUES)

    def send_all(self) -> None:
        producer = Producer("newcomer-producer", self.stack.namesrv_addr, instance_name="newcomer-p").start()
        try:
            for topic, count in SENT.items():
                for i in range(count):
                    msg = Message(topic, f'{{"n": {i}, "topic": "{topic}"}}'.encode())
                    poison = topic == AUDIT and i % POISON_EVERY == 0
                    msg.keys, msg.tags = f"{'poison' if poison else 'order'}-{i}", "newcomer"
                    result = producer.send(msg)
                    if result.send_status == "SEND_OK":
                        self.sent[topic] += 1
                    if poison:
                        self.poisoned.append(result)
            for i in range(DELAYED):
                msg = Message(ORDERS, f"later-{i}".encode())
                msg.keys, msg.delay_time_level = f"later-{i}", DELAY_LEVEL
                self.delayed_ids.append(producer.send(msg).msg_id)
        finally:
            producer.shutdown()
        halves = [Message(AUDIT, f"undecided-{i}".encode()) for i in range(HALF)]
        self.half_ids = send_pending_transactions(self.stack.namesrv_addr, "newcomer-tx", halves)

    # -- the engine's figures ---------------------------------------------------------------
    def poison_count(self) -> int:
        return len(self.poisoned)

    def lag(self, group: str) -> int:
        try:
            return self.admin.consumer_progress(group).diff_total
        except NotFoundError:
            return -1

    def dead_letters(self, group: str) -> int:
        try:
            status = self.admin.topic_status(f"{DLQ_GROUP_TOPIC_PREFIX}{group}")
        except NotFoundError:
            return 0
        return sum(q.max_offset - q.min_offset for q in status.queues)

    def delayed_pending(self) -> int:
        """Messages of DELAY_LEVEL not yet delivered: the schedule queue's end less its progress."""
        end = self.admin.max_offset(self.broker_addr, SCHEDULE_TOPIC, DELAY_LEVEL - 1)
        delivered = self.admin.delay_offsets(self.broker_addr).get(DELAY_LEVEL, 0)
        return end - delivered

    def settled(self) -> None:
        """Wait until each group is where the journey leaves it, as the engine reports it."""
        poison, sent = self.poison_count(), self.sent
        checks = [
            (lambda: self.lag(KEEPING_UP) == 0 and self.consumed[KEEPING_UP] == sent[ORDERS], "keeping up"),
            (lambda: self.lag(SLOW) == sent[PAYMENTS] - SLOW_TAKES, "the slow group stalled behind"),
            (lambda: self.dead_letters(RETRIES) == poison, "the poison messages dead-lettered"),
            (lambda: self.lag(RETRIES) == 0, "the retry group caught up"),
        ]
        for check, what in checks:
            wait_until(check, timeout=WITHIN_S, interval=0.5, what=what)
        assert self.consumed[RETRIES] == sent[AUDIT] - poison
        assert self.delayed_pending() == DELAYED
