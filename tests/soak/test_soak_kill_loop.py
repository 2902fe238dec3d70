"""Soak: a broker SIGKILLed and restarted again and again while producers send and a consumer
group consumes, then an exact accounting of what the store holds.

Every message a producer was told is stored (a sync send answered SEND_OK) must be in the store
exactly once, at the queue and offset the answer named, with the body that was sent and a body CRC
that checks; a message whose send failed (the broker died under it) may be there at most once;
nothing else may be. The group's committed offsets never run ahead of what its listener consumed,
never go back while one broker process lives, and after a restart never fall below what the broker
had persisted when it was killed. With SYNC_FLUSH an answer means "on disk"; with ASYNC_FLUSH only
the broker process dies (not the machine), so what it wrote is still in the page cache and the same
accounting holds.
"""

from __future__ import annotations

import json
import random
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from broker.client import ConsumeConcurrentlyStatus, Producer
from broker.client.admin import MQAdmin
from broker.common.message import Message
from broker.common.message_id import create_unique_id
from broker.local_cluster import wait_until
from tests.cluster import SEMANTICS, Cluster, start

pytestmark = pytest.mark.slow

TOPIC = "SoakKillTopic"
GROUP = "soak-kill-consumers"
QUEUES = 4
KILLS = 6
PRODUCERS = 3
SENT_BETWEEN_KILLS = 300  # acknowledged sends each broker life must see before it is killed


@dataclass
class Ledger:
    """What the producers were told, and what the consumer's listener saw."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, tuple[int, int, bytes]] = field(default_factory=dict)  # id → (queue, offset, body)
    unacked: dict[str, bytes] = field(default_factory=dict)  # id → body: send failed, fate unknown
    consumed: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))  # queue → offsets
    errors: list[str] = field(default_factory=list)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def listener(self, messages, context):
        time.sleep(random.random() / 200)  # some work: messages stay in flight side by side
        with self.lock:
            for msg in messages:
                self.consumed[msg.queue_id].add(msg.queue_offset)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def consumed_below(self, queue_id: int, offset: int) -> list[int]:
        """Offsets under ``offset`` of the queue the listener has not consumed yet."""
        with self.lock:
            seen = set(self.consumed[queue_id])
        return [o for o in range(offset) if o not in seen]


def body_of(producer: int, seq: int) -> bytes:
    return (f"p{producer}-{seq}|" * (1 + (producer * 7 + seq) % 30)).encode()


def produce(cluster: Cluster, ledger: Ledger, index: int, stop: threading.Event) -> None:
    # No SDK retry: a retried send of a message the dead broker had stored would be a legitimate
    # duplicate (at-least-once); the test's own loop sends a new message instead, so every id that
    # was acknowledged is expected exactly once.
    producer = Producer(
        f"soak-kill-producer-{index}",
        cluster.namesrv_addr,
        retry_times=0,
        latency_fault_enable=False,
        send_timeout_ms=3000,
        instance=cluster.instance(f"soak-kill-p{index}"),
    ).start()
    seq = 0
    try:
        while not stop.is_set():
            seq += 1
            msg = Message(TOPIC, body_of(index, seq))
            msg.unique_key = create_unique_id()
            try:
                result = producer.send(msg)
            except Exception:
                with ledger.lock:
                    ledger.unacked[msg.unique_key] = msg.body
                stop.wait(0.05)  # the broker is down or restarting: do not spin
                continue
            with ledger.lock:
                if result.send_status != "SEND_OK":
                    ledger.errors.append(f"{msg.unique_key}: {result.send_status}")
                    ledger.unacked[msg.unique_key] = msg.body
                else:
                    queue = result.message_queue.queue_id
                    ledger.acked[result.msg_id] = (queue, result.queue_offset, msg.body)
    finally:
        producer.shutdown()


class OffsetWatch:
    """Samples the group's committed offsets and checks them against the listener's record."""

    def __init__(self, cluster: Cluster, admin: MQAdmin, ledger: Ledger) -> None:
        self.cluster, self.admin, self.ledger = cluster, admin, ledger
        self.life = 0  # which broker process answers
        self.last: dict[tuple[int, int], int] = {}  # (life, queue) → last committed offset seen
        self.floor: dict[int, int] = {}  # queue → offset the killed broker had persisted
        self.violations: list[str] = []
        self.samples = 0

    def sample(self) -> None:
        life = self.life
        for queue in range(QUEUES):
            try:
                offset = self.admin.query_consumer_offset(self.cluster.broker_addr, GROUP, TOPIC, queue)
            except Exception:
                return  # broker down: nothing to judge
            if life != self.life:
                return  # answered by a process killed meanwhile
            self.samples += 1
            self.judge(life, queue, offset)

    def judge(self, life: int, queue: int, offset: int) -> None:
        if offset < 0:
            return
        missing = self.ledger.consumed_below(queue, offset)
        if missing:
            self.violations.append(
                f"queue {queue}: committed {offset} but offsets {missing[:5]} were never consumed"
            )
        previous = self.last.get((life, queue))
        if previous is not None and offset < previous:
            self.violations.append(f"queue {queue}: committed offset went back {previous} → {offset}")
        if offset < self.floor.get(queue, -1):
            self.violations.append(
                f"queue {queue}: restarted broker answered {offset}, below the {self.floor[queue]} "
                "it had persisted before it was killed"
            )
        self.last[(life, queue)] = offset if previous is None else max(offset, previous)

    def seen_this_life(self) -> bool:
        return all((self.life, q) in self.last for q in range(QUEUES))

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(0.1):
            self.sample()


def _answers(call, *args):
    """The call's answer, or None while the broker or name server cannot give one."""
    try:
        return call(*args)
    except Exception:
        return None


def persisted_offsets(cluster: Cluster) -> dict[int, int]:
    files = list(cluster.workdir.glob("store/**/consumerOffset.json"))
    if not files:
        return {}
    table = json.loads(files[0].read_text() or "{}").get("offsetTable", {})
    return {int(q): int(o) for q, o in table.get(f"{TOPIC}@{GROUP}", {}).items()}


def read_store(admin: MQAdmin, broker_addr: str) -> dict[str, list[tuple[int, int, bytes]]]:
    """Every message of the topic, pulled queue by queue from offset 0: id → where it lies."""
    found: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
    for queue in range(QUEUES):
        end = admin.max_offset(broker_addr, TOPIC, queue)
        expected = 0
        for msg in admin.iter_queue_messages(broker_addr, TOPIC, queue, 0, end):
            assert msg.queue_offset == expected, f"queue {queue}: offset {expected} missing"
            assert zlib.crc32(msg.body) & 0x7FFFFFFF == msg.body_crc, f"queue {queue}@{expected}: bad CRC"
            key = msg.unique_key
            assert key is not None, f"queue {queue}@{expected}: no unique key"
            found[key].append((queue, msg.queue_offset, msg.body))
            expected += 1
        assert expected == end, f"queue {queue}: pulled {expected} messages of {end}"
    return found


@pytest.mark.parametrize("flush_disk_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_kill_loop_under_load_keeps_every_acknowledged_message_exactly_once(tmp_path, flush_disk_type):
    settings = {"flushDiskType": flush_disk_type, "autoCreateTopicEnable": "true"}
    cluster = start(SEMANTICS, tmp_path, settings)
    admin = MQAdmin(cluster.namesrv_addr, timeout=2.0)
    ledger = Ledger()
    watch = OffsetWatch(cluster, admin, ledger)
    stop_producers, stop_watch = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    floors: list[dict[int, int]] = []
    consumer = None
    try:
        cluster.create_topic(TOPIC, QUEUES)
        assert wait_until(lambda: _answers(admin.topic_route, TOPIC), timeout=30), "no route for the topic"
        consumer = cluster.push_consumer(GROUP, TOPIC, ledger.listener, "soak-kill-c")
        threads = [
            threading.Thread(target=produce, args=(cluster, ledger, i, stop_producers), daemon=True)
            for i in range(PRODUCERS)
        ]
        threads.append(threading.Thread(target=watch.run, args=(stop_watch,), daemon=True))
        for thread in threads:
            thread.start()

        for kill in range(KILLS):
            target = ledger.acked_count() + SENT_BETWEEN_KILLS

            def acked_enough(t: int = target) -> bool:
                return ledger.acked_count() >= t

            assert wait_until(acked_enough, timeout=90), (
                f"before kill {kill + 1}: only {ledger.acked_count()} sends acknowledged, wanted {target}\n"
                + "".join(cluster.broker.output[-30:])
            )
            # The group has committed in this broker's life, and the broker persisted offsets.
            assert wait_until(lambda: watch.seen_this_life() and persisted_offsets(cluster), timeout=60), (
                f"before kill {kill + 1}: no committed offsets seen in this broker's life"
            )
            floor = persisted_offsets(cluster)  # the broker may write a newer one before it dies
            floors.append(floor)
            cluster.broker.kill()
            # Only now is the next process's life counted: a sample answered before the kill
            # belongs to the old process, whose unpersisted offsets the new one may not know.
            watch.floor = floor
            watch.life += 1
            cluster.start_broker()
            if kill % 2:  # the consumer restarts too: it goes on from the offsets it committed
                consumer.shutdown()
                consumer = cluster.push_consumer(GROUP, TOPIC, ledger.listener, f"soak-kill-c{kill}")

        target = ledger.acked_count() + SENT_BETWEEN_KILLS
        assert wait_until(lambda: ledger.acked_count() >= target, timeout=90)
        stop_producers.set()
        for thread in threads[:-1]:
            thread.join(30)
            assert not thread.is_alive(), "a producer thread did not stop"

        def caught_up() -> bool:
            ends = [_answers(admin.max_offset, cluster.broker_addr, TOPIC, q) for q in range(QUEUES)]
            return None not in ends and [watch.last.get((watch.life, q), -1) for q in range(QUEUES)] == ends

        assert wait_until(caught_up, timeout=90), f"the group never reached lag 0: {watch.last}"
        stop_watch.set()
        threads[-1].join(10)

        found = read_store(admin, cluster.broker_addr)
    finally:
        stop_producers.set()
        stop_watch.set()
        if consumer is not None:
            consumer.shutdown()
        admin.close()
        cluster.stop()

    assert not ledger.errors, ledger.errors
    assert len(ledger.acked) >= (KILLS + 1) * SENT_BETWEEN_KILLS
    lost = [i for i in ledger.acked if i not in found]
    assert not lost, f"{len(lost)} acknowledged messages are not in the store, e.g. {lost[:3]}"
    doubled = {i: where for i, where in found.items() if len(where) > 1}
    assert not doubled, f"{len(doubled)} messages stored more than once, e.g. {list(doubled.items())[:2]}"
    moved = {i: (ledger.acked[i], found[i][0]) for i in ledger.acked if found[i][0] != ledger.acked[i]}
    assert not moved, f"acknowledged messages not where their send result said: {list(moved.items())[:3]}"
    strangers = [i for i in found if i not in ledger.acked and i not in ledger.unacked]
    assert not strangers, f"the store holds messages nobody sent: {strangers[:3]}"
    for msg_id, [(_, _, body)] in found.items():
        if msg_id in ledger.unacked:
            assert body == ledger.unacked[msg_id]
    # Every stored message was consumed by the group at least once.
    unconsumed = [(q, o) for q, o, _ in (w[0] for w in found.values()) if o not in ledger.consumed[q]]
    assert not unconsumed, f"stored but never consumed: {unconsumed[:5]}"
    print(
        f"{flush_disk_type}: {len(ledger.acked)} acked, {len(ledger.unacked)} failed sends, "
        f"{sum(len(w) for w in found.values())} stored, {watch.samples} offset samples"
    )
    assert watch.samples > 0 and len(floors) == KILLS and all(floors), floors
    assert not watch.violations, "\n".join(watch.violations[:10])
