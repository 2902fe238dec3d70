"""Acceptance 5: orderly consumers keep each order id's messages in send order, lose none,
across random listener failures and a rebalance in the middle of the run."""

import asyncio
import random
import threading
import time
from collections import defaultdict

import orjson

from broker.client import (
    BROADCASTING,
    CONSUME_FROM_FIRST_OFFSET,
    AsyncPushConsumer,
    ConsumeOrderlyStatus,
    Producer,
    PushConsumer,
    hash_selector,
)
from broker.client.admin import MQAdmin, NotFoundError
from broker.common import message_const as const
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from broker.remoting.command import create_request
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.listener_failures import ListenerFailures

TOPIC = "OrderTopic"
GROUP = "orderly-group"
MESSAGES, ORDER_IDS, QUEUES = 10_000, 100, 8


cluster = cluster_fixture(ONE_BROKER, topics={TOPIC: QUEUES}, scope="function")


class OrderChecker:
    """Records what each listener call saw, and whether two listeners ever worked on one queue
    at once: a call counts itself in on entry and out on exit, in separate lock holds, and does
    its work in between, so a second call on the same queue meanwhile finds the count at 1."""

    def __init__(self, failure_rate: float) -> None:
        self.lock = threading.Lock()
        self.done: dict[str, list[int]] = defaultdict(list)
        self.in_listener: dict[int, int] = defaultdict(int)  # queue id -> listener calls on it now
        self.overlaps: list[tuple] = []
        self.failures = 0
        self.rng = random.Random(7)
        self.failure_rate = failure_rate

    def listener_for(self, name: str):
        def listener(messages, context):
            queue_id = context["message_queue"].queue_id
            with self.lock:
                self.in_listener[queue_id] += 1
                if self.in_listener[queue_id] > 1:
                    self.overlaps.append((queue_id, name, self.in_listener[queue_id]))
                fail = self.rng.random() < self.failure_rate
            try:
                if fail:
                    with self.lock:
                        self.failures += 1
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                for msg in messages:
                    order_id, seq = msg.body.decode().split(":")
                    with self.lock:
                        self.done[order_id].append(int(seq))
                # What a listener's work takes (a write elsewhere, an I/O wait): other threads run
                # meanwhile, so a second listener on this queue would start before this one ends.
                time.sleep(0.001)
                return ConsumeOrderlyStatus.SUCCESS
            finally:
                with self.lock:
                    self.in_listener[queue_id] -= 1

        return listener

    @property
    def total(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.done.values())


def _orderly_consumer(cluster, name, checker):
    consumer = PushConsumer(
        GROUP,
        cluster.namesrv_addr,
        instance_name=name,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        consume_threads=4,
        rebalance_interval_ms=300,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener_orderly(checker.listener_for(name), suspend_current_queue_time_ms=10)
    return consumer.start()


def _produce(cluster, sent: dict):
    producer = Producer("orderly-producer", cluster.namesrv_addr).start()
    rng = random.Random(11)
    try:
        for _ in range(MESSAGES):
            order_id = f"order-{rng.randrange(ORDER_IDS)}"
            seq = sent[order_id]
            producer.send(Message(TOPIC, f"{order_id}:{seq}".encode()), selector=hash_selector, arg=order_id)
            sent[order_id] = seq + 1
    finally:
        producer.shutdown()


def test_three_orderly_consumers_keep_order_through_failures_and_a_rebalance(cluster):
    checker = OrderChecker(failure_rate=0.02)
    sent: dict[str, int] = defaultdict(int)
    producing = threading.Thread(target=_produce, args=(cluster, sent))
    consumers = [_orderly_consumer(cluster, "c1", checker), _orderly_consumer(cluster, "c2", checker)]
    try:
        producing.start()
        assert wait_until(lambda: checker.total >= MESSAGES // 3, timeout=60)
        consumers.append(_orderly_consumer(cluster, "c3", checker))  # a rebalance mid-run
        producing.join(120)
        assert wait_until(lambda: checker.total >= MESSAGES, timeout=60), checker.total
        assert all(len(c.assigned) >= 2 for c in consumers), [sorted(c.assigned) for c in consumers]
    finally:
        for consumer in consumers:
            consumer.shutdown()
    # Every queue was unlocked on shutdown: another client can lock them all at once.
    probe = {"consumerGroup": GROUP, "clientId": "probe", "mqSet": [
        {"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in range(QUEUES)]}  # fmt: skip
    locked = cluster.admin.invoke(
        cluster.broker_addr, create_request(RequestCode.LOCK_BATCH_MQ, body=orjson.dumps(probe))
    )
    assert len(orjson.loads(locked.body)["lockOKMQSet"]) == QUEUES
    assert checker.failures > 0
    assert checker.overlaps == [], (
        f"two listeners on one queue at once (queue, consumer, count): {checker.overlaps[:5]}"
    )
    assert sum(sent.values()) == MESSAGES
    for order_id, count in sent.items():
        assert checker.done[order_id] == list(range(count)), order_id


def test_broker_queue_locks_are_per_client_and_released(cluster):
    def call(code, client_id, queue_ids):
        mqs = [{"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in queue_ids]
        body = {"consumerGroup": GROUP, "clientId": client_id, "mqSet": mqs}
        response = cluster.admin.invoke(cluster.broker_addr, create_request(code, body=orjson.dumps(body)))
        assert response.ok, response.remark
        return sorted(q["queueId"] for q in orjson.loads(response.body or b"{}").get("lockOKMQSet", []))

    assert call(RequestCode.LOCK_BATCH_MQ, "client-a", [0, 1]) == [0, 1]
    assert call(RequestCode.LOCK_BATCH_MQ, "client-b", [1, 2]) == [2]
    assert call(RequestCode.LOCK_BATCH_MQ, "client-a", [0, 1]) == [0, 1]  # renewal
    call(RequestCode.UNLOCK_BATCH_MQ, "client-b", [1])  # not b's lock: nothing changes
    assert call(RequestCode.LOCK_BATCH_MQ, "client-b", [1]) == []
    call(RequestCode.UNLOCK_BATCH_MQ, "client-a", [1])
    assert call(RequestCode.LOCK_BATCH_MQ, "client-b", [1]) == [1]


def test_a_message_failing_past_max_reconsume_times_is_sent_back_and_the_queue_moves_on(cluster):
    cluster.create_topic("PoisonTopic", 1)
    attempts, done = [], threading.Event()

    def listener(messages, context):
        msg = messages[0]
        attempts.append((msg.body, msg.reconsume_times))
        if msg.body == b"poison":
            context["suspend_current_queue_time_ms"] = 5  # overrides the consumer's minute below
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        "poison-group",
        cluster.namesrv_addr,
        instance_name="poison",
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe("PoisonTopic", "*")
    consumer.register_message_listener_orderly(
        listener, suspend_current_queue_time_ms=60_000, max_reconsume_times=2
    )
    consumer.start()
    producer = Producer("poison-producer", cluster.namesrv_addr, instance_name="poison-p").start()
    try:
        poison = Message("PoisonTopic", b"poison")
        poison.keys = "poison-key"
        sent = producer.send(poison)
        nxt = producer.send(Message("PoisonTopic", b"next"))
        assert done.wait(30)
        # An operator's "consume this message directly" reaches the orderly listener too.
        assert consumer.instance is not None  # started
        direct = {"consumerGroup": "poison-group", "clientId": consumer.instance.client_id,
                  "msgId": nxt.offset_msg_id}  # fmt: skip
        answer = cluster.admin.invoke(
            cluster.broker_addr, create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, direct), 15_000
        )
        assert answer.ok, answer.remark
        assert orjson.loads(answer.body)["consumeResult"] == "CR_SUCCESS"
        assert orjson.loads(answer.body)["order"] is True
    finally:
        producer.shutdown()
        consumer.shutdown()
    assert attempts[:4] == [(b"poison", 0), (b"poison", 1), (b"poison", 2), (b"next", 0)]
    assert attempts[4:] == [(b"next", 0)]  # the direct consumption

    def sent_back():
        with MQAdmin(cluster.namesrv_addr) as admin:
            found = []
            for topic in ("%RETRY%poison-group", "%DLQ%poison-group"):
                try:
                    found += admin.query_message_by_key(topic, "poison-key")
                except NotFoundError:
                    pass
            return found

    assert wait_until(lambda: sent_back(), timeout=15)
    back = sent_back()[0]
    assert back.body == b"poison"
    assert back.properties[const.PROPERTY_RETRY_TOPIC] == "PoisonTopic"
    assert back.properties[const.PROPERTY_ORIGIN_MESSAGE_ID] == sent.msg_id
    assert back.unique_key == sent.msg_id  # same client msgId: the retry joins the message's trace
    assert back.reconsume_times == 2  # carried in the send header, as RocketMQ


def test_broadcasting_orderly_consumers_each_get_everything_in_order(cluster, tmp_path):
    cluster.create_topic("BroadcastOrder", 2)
    seen: dict[str, defaultdict[int, list[int]]] = {"b1": defaultdict(list), "b2": defaultdict(list)}

    def listener_for(name):
        def listener(messages, context):
            for msg in messages:
                seen[name][msg.queue_id].append(int(msg.body))
            return ConsumeOrderlyStatus.SUCCESS

        return listener

    consumers = []
    for name in seen:
        consumer = PushConsumer(
            "broadcast-orderly", cluster.namesrv_addr, instance_name=name, message_model=BROADCASTING,
            consume_from_where=CONSUME_FROM_FIRST_OFFSET, offset_store_dir=str(tmp_path / name),
        )  # fmt: skip
        consumer.subscribe("BroadcastOrder", "*")
        consumer.register_message_listener_orderly(listener_for(name))
        consumers.append(consumer.start())
    producer = Producer("broadcast-producer", cluster.namesrv_addr, instance_name="bp").start()
    try:
        for i in range(40):
            producer.send(Message("BroadcastOrder", str(i).encode()), selector=hash_selector, arg=f"o{i % 2}")
        total = lambda name: sum(len(v) for v in seen[name].values())  # noqa: E731
        assert wait_until(lambda: total("b1") == 40 and total("b2") == 40, timeout=30)
    finally:
        producer.shutdown()
        for consumer in consumers:
            consumer.shutdown()
    assert seen["b1"] == seen["b2"]
    for values in seen["b1"].values():
        assert values == sorted(values)


def test_asyncio_orderly_listener_runs_on_the_callers_loop(cluster):
    cluster.create_topic("AsyncOrder", 1)
    producer = Producer("async-order-producer", cluster.namesrv_addr, instance_name="ap").start()
    try:
        for i in range(20):
            producer.send(Message("AsyncOrder", str(i).encode()))
    finally:
        producer.shutdown()

    async def scenario():
        seen: list[int] = []
        loop, all_seen = asyncio.get_running_loop(), asyncio.Event()
        failures = ListenerFailures()

        @failures.watch
        async def listener(messages, context):
            assert asyncio.get_running_loop() is loop
            seen.extend(int(m.body) for m in messages)
            if len(seen) == 20:
                all_seen.set()
            return ConsumeOrderlyStatus.SUCCESS

        consumer = AsyncPushConsumer(
            "async-orderly",
            cluster.namesrv_addr,
            instance_name="ac",
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("AsyncOrder", "*")
        consumer.register_message_listener_orderly(listener)
        await consumer.start()
        try:
            await failures.wait_async(all_seen.wait(), 30)
        finally:
            await consumer.shutdown()
        return seen

    assert asyncio.run(scenario()) == list(range(20))
