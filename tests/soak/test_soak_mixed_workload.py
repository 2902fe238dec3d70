"""Soak: minutes of mixed traffic through one real broker, then an exact accounting.

Several topics at once: tag-filtered, SQL92-filtered and unfiltered clustering groups and a
two-member broadcasting group on one topic, delayed messages (short levels), consumption that
fails and is retried until some messages become dead letters, a transactional producer whose local
transactions commit, roll back or answer "unknown" and are settled by the broker's check, and
ordered messages. When the producers stop, every group must have been given exactly the messages
it should get, each once (retries exactly as often as the failures asked), dead letters exactly the
always-failing messages, rolled-back messages never, each order's steps in order, and every group
must end with lag 0.

``SOAK_SECONDS`` (default 150) sets how long the producers run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from broker.client import (
    BROADCASTING,
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    MessageSelector,
    Producer,
    PushConsumer,
    TransactionProducer,
    hash_selector,
)
from broker.client.admin import MQAdmin
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import SEMANTICS, start

pytestmark = pytest.mark.slow

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "150"))
DELAY_LEVELS = "1s 2s 3s 1s 1s 1s 1s 1s"
DELAY_MS = {1: 1000, 2: 2000, 3: 3000}

EVENTS, RETRIES, DELAYED, TX, ORDERS = "SoakEvents", "SoakRetries", "SoakDelayed", "SoakTx", "SoakOrders"
QUEUES = {EVENTS: 4, RETRIES: 2, DELAYED: 2, TX: 2, ORDERS: 4}
ALL, TAGGED, SQL, BCAST = "soak-all", "soak-tag-a-or-b", "soak-sql-eu-big", "soak-broadcast"
RETRYING, DELAY, TXG, ORDERLY = "soak-retrying", "soak-delayed", "soak-tx", "soak-orderly"
SQL_EXPRESSION = "region = 'eu' AND amount >= 50"
RETRY_MAX_TIMES = 2
STEPS = 5  # messages per order
COMMIT, ROLLBACK, UNKNOW = (
    LocalTransactionState.COMMIT_MESSAGE,
    LocalTransactionState.ROLLBACK_MESSAGE,
    LocalTransactionState.UNKNOW,
)
TX_OUTCOMES = ("commit", "rollback", "unknown-commit", "unknown-rollback")


def delay_level_of(i: int) -> int:
    return 1 + i % 3


def event_attributes(i: int) -> tuple[str, str, int]:
    return "ABC"[i % 3], ("eu", "us")[i % 2], (i * 37) % 100


class Ledger:
    """What was sent (per kind) and what each consumer was given; listener failures are kept to be
    raised in the test's own thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[str, list[str]] = defaultdict(list)  # kind → keys in send order
        self.msg_ids: dict[str, str] = {}  # key → message id
        self.got: dict[str, Counter] = defaultdict(Counter)  # consumer → key → successful deliveries
        self.attempts: Counter = Counter()  # retry-topic key → deliveries
        self.orders: dict[str, list[int]] = defaultdict(list)  # order → steps in consumption order
        self.problems: list[str] = []
        self.tx_checks: Counter = Counter()

    def record_sent(self, kind: str, key: str, msg_id: str) -> None:
        with self.lock:
            self.sent[kind].append(key)
            self.msg_ids[key] = msg_id

    def sent_keys(self, kind: str) -> list[str]:
        with self.lock:
            return list(self.sent[kind])

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def counting(self, consumer: str):
        def listener(messages, context):
            try:
                with self.lock:
                    for msg in messages:
                        self.got[consumer][msg.keys[0]] += 1
                        if consumer == DELAY:
                            self._check_delay(msg)
            except Exception as exc:  # surfaced by the test, not lost in a consume thread
                self.problem(f"{consumer} listener: {exc!r}")
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    def _check_delay(self, msg) -> None:
        level = delay_level_of(int(msg.keys[0].split("-")[1]))
        early = msg.born_timestamp + DELAY_MS[level] - int(time.time() * 1000)
        if early > 0:
            self.problems.append(f"delayed {msg.keys[0]} (level {level}) arrived {early} ms early")

    def retrying(self, messages, context):
        msg = messages[0]
        key = msg.keys[0]
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
        fate = msg.get_property("fate")
        if fate == "dead" or (fate == "flaky" and attempt == 1):
            context["delay_level_when_next_consume"] = 1
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        with self.lock:
            self.got[RETRYING][key] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def ordered(self, messages, context):
        with self.lock:
            for msg in messages:
                self.orders[msg.get_property("order")].append(int(msg.get_property("step")))
        return ConsumeOrderlyStatus.SUCCESS

    # -- the transactional producer's local transactions ------------------------------------
    def execute_local_transaction(self, msg, arg):
        outcome = msg.get_property("outcome")
        return {"commit": COMMIT, "rollback": ROLLBACK}.get(outcome, UNKNOW)

    def check_local_transaction(self, msg):
        outcome = msg.get_property("outcome")
        with self.lock:
            self.tx_checks[outcome] += 1
        # The truth, as an application answers: a check may also reach a transaction that was
        # committed or rolled back when its end request came late (a busy machine).
        return COMMIT if outcome.endswith("commit") else ROLLBACK


# -- producers -----------------------------------------------------------------------------------


def keyed(topic: str, key: str, body: str, **properties: str) -> Message:
    msg = Message(topic, body.encode())
    msg.keys = [key]
    for name, value in properties.items():
        msg.put_user_property(name, value)
    return msg


def send_events(producer: Producer, ledger: Ledger, i: int) -> None:
    tag, region, amount = event_attributes(i)
    msg = keyed(EVENTS, f"ev-{i}", f"event {i}", region=region, amount=str(amount))
    msg.tags = tag
    ledger.record_sent(EVENTS, f"ev-{i}", producer.send(msg).msg_id)


def send_retry(producer: Producer, ledger: Ledger, i: int) -> None:
    fate = ("ok", "flaky", "dead")[i % 3]
    key = f"re-{fate}-{i}"
    ledger.record_sent(fate, key, producer.send(keyed(RETRIES, key, f"retry {i}", fate=fate)).msg_id)


def send_delayed(producer: Producer, ledger: Ledger, i: int) -> None:
    msg = keyed(DELAYED, f"de-{i}", f"delayed {i}")
    msg.delay_time_level = delay_level_of(i)
    ledger.record_sent(DELAYED, f"de-{i}", producer.send(msg).msg_id)


def send_order(producer: Producer, ledger: Ledger, i: int) -> None:
    # Three orders at a time interleave (message i is a step of order i % 3 of its batch); each
    # order's steps go in sequence through one queue (hash_selector on the order id).
    batch, lane = divmod(i, 3 * STEPS)
    order, step = f"order-{batch * 3 + lane % 3}", lane // 3
    key = f"{order}-{step}"
    msg = keyed(ORDERS, key, f"{order} step {step}", order=order, step=str(step))
    ledger.record_sent(ORDERS, key, producer.send(msg, selector=hash_selector, arg=order).msg_id)


def send_transaction(producer: TransactionProducer, ledger: Ledger, i: int) -> None:
    outcome = TX_OUTCOMES[i % len(TX_OUTCOMES)]
    key = f"tx-{outcome}-{i}"
    result = producer.send_message_in_transaction(keyed(TX, key, f"tx {i}", outcome=outcome))
    ledger.record_sent(outcome, key, result.send_result.msg_id)


def keep_sending(send, producer, ledger: Ledger, interval_s: float, stop: threading.Event, finish):
    """Call ``send`` every ``interval_s`` until ``stop``; then ``finish(i)`` (an order's last steps)."""
    i = 0
    try:
        while not stop.is_set():
            send(producer, ledger, i)
            i += 1
            stop.wait(interval_s)
        while finish(i):
            send(producer, ledger, i)
            i += 1
    except Exception as exc:
        ledger.problem(f"{send.__name__} failed at message {i}: {exc!r}")


# -- the accounting ----------------------------------------------------------------------------


def expected_deliveries(ledger: Ledger) -> dict[str, Counter]:
    events = ledger.sent_keys(EVENTS)

    def events_where(keep) -> Counter:
        return Counter(k for k in events if keep(*event_attributes(int(k[3:]))))

    everything = Counter(events)
    return {
        ALL: everything,
        f"{BCAST}-1": everything,
        f"{BCAST}-2": everything,
        TAGGED: events_where(lambda tag, region, amount: tag in "AB"),
        SQL: events_where(lambda tag, region, amount: region == "eu" and amount >= 50),
        RETRYING: Counter(ledger.sent_keys("ok") + ledger.sent_keys("flaky")),
        DELAY: Counter(ledger.sent_keys(DELAYED)),
        TXG: Counter(ledger.sent_keys("commit") + ledger.sent_keys("unknown-commit")),
    }


def expected_orders(ledger: Ledger) -> dict[str, list[int]]:
    orders: dict[str, list[int]] = defaultdict(list)
    for key in ledger.sent_keys(ORDERS):
        order, step = key.rsplit("-", 1)
        orders[order].append(int(step))
    return dict(orders)


def shortfall(ledger: Ledger) -> str:
    """What some group has not been given yet (empty once everything arrived)."""
    with ledger.lock:
        got = {name: Counter(counts) for name, counts in ledger.got.items()}
        orders = {order: list(steps) for order, steps in ledger.orders.items()}
        attempts = Counter(ledger.attempts)
    for name, want in expected_deliveries(ledger).items():
        missing = want - got.get(name, Counter())
        if missing:
            return f"{name} lacks {sum(missing.values())}, e.g. {list(missing)[:3]}"
    for order, steps in expected_orders(ledger).items():
        if len(orders.get(order, [])) < len(steps):
            return f"{ORDERLY} has {orders.get(order)} of {order}"
    for key in ledger.sent_keys("dead"):
        if attempts[key] < 1 + RETRY_MAX_TIMES:
            return f"{key} delivered {attempts[key]} times"
    return ""


def dead_letters(admin: MQAdmin, ledger: Ledger) -> dict[str, str]:
    """Dead message key → the DLQ copy's body, for each dead-lettered message found by id."""
    found = {}
    for key in ledger.sent_keys("dead"):
        try:
            copies = admin.query_message_by_id(f"%DLQ%{RETRYING}", ledger.msg_ids[key])
        except Exception:
            continue
        if copies:
            found[key] = copies[0].body.decode()
    return found


def lags(admin: MQAdmin) -> dict[str, int | str]:
    result: dict[str, int | str] = {}
    for group in (ALL, TAGGED, SQL, RETRYING, DELAY, TXG, ORDERLY):
        try:
            result[group] = admin.consumer_progress(group).diff_total
        except Exception as exc:
            result[group] = repr(exc)
    return result


# -- the test ------------------------------------------------------------------------------------


def start_consumer(cluster, group, topic, selector, name, listener=None, orderly=None, **options):
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        instance_name=name,
        rebalance_interval_ms=1000,
        persist_interval_ms=500,
        **options,
    )
    consumer.subscribe(topic, selector)
    if orderly is not None:
        consumer.register_message_listener_orderly(orderly)
    else:
        consumer.register_message_listener(listener)
    return consumer.start()


def broadcast_offsets(directory: Path) -> dict[int, int]:
    import json

    files = list(directory.glob(f"*/{BCAST}/offsets.json"))
    assert len(files) == 1, files
    table = json.loads(files[0].read_text())["offsetTable"]
    return {int(k.rsplit("@", 1)[1]): v for k, v in table.items() if k.startswith(f"{EVENTS}@")}


def test_mixed_workload_ends_in_an_exact_accounting(tmp_path):
    settings = {
        "enablePropertyFilter": "true",
        "messageDelayLevel": DELAY_LEVELS,
        "transactionCheckInterval": "500",
        "transactionTimeOut": "1000",
        "transactionCheckMax": "10",
    }
    cluster = start(SEMANTICS, tmp_path, settings)
    admin = MQAdmin(cluster.namesrv_addr, timeout=5.0)
    ledger = Ledger()
    consumers, producers, threads = [], [], []
    stop = threading.Event()
    try:
        for topic, queues in QUEUES.items():
            cluster.create_topic(topic, queues)
        assert wait_until(lambda: all(_answers(admin.topic_route, t) for t in QUEUES), timeout=30)
        admin.create_or_update_subscription_group(
            cluster.broker_addr, RETRYING, retry_max_times=RETRY_MAX_TIMES
        )
        consumers += [
            start_consumer(cluster, ALL, EVENTS, "*", "c-all", ledger.counting(ALL)),
            start_consumer(cluster, TAGGED, EVENTS, "A || B", "c-tag", ledger.counting(TAGGED)),
            start_consumer(
                cluster, SQL, EVENTS, MessageSelector.by_sql(SQL_EXPRESSION), "c-sql", ledger.counting(SQL)
            ),
            start_consumer(cluster, RETRYING, RETRIES, "*", "c-retry", ledger.retrying),
            start_consumer(cluster, DELAY, DELAYED, "*", "c-delay", ledger.counting(DELAY)),
            start_consumer(cluster, TXG, TX, "*", "c-tx", ledger.counting(TXG)),
            start_consumer(cluster, ORDERLY, ORDERS, "*", "c-orderly", orderly=ledger.ordered),
        ]
        bcast_dirs = [tmp_path / "bcast-1", tmp_path / "bcast-2"]
        for n, directory in enumerate(bcast_dirs, 1):
            consumers.append(
                start_consumer(
                    cluster,
                    BCAST,
                    EVENTS,
                    "*",
                    f"c-bcast-{n}",
                    ledger.counting(f"{BCAST}-{n}"),
                    message_model=BROADCASTING,
                    offset_store_dir=str(directory),
                )
            )

        def producer(group: str) -> Producer:
            made = Producer(group, cluster.namesrv_addr, send_timeout_ms=10_000, instance_name=group)
            producers.append(made.start())
            return made

        tx_producer = TransactionProducer(
            "soak-tx-producer", cluster.namesrv_addr, ledger, instance=cluster.instance("soak-tx-p")
        ).start()
        producers.append(tx_producer)
        never = lambda i: False  # noqa: E731
        plan = [
            (send_events, producer("soak-events-p"), 0.05, never),
            (send_retry, producer("soak-retry-p"), 0.5, never),
            (send_delayed, producer("soak-delay-p"), 0.4, never),
            (send_order, producer("soak-order-p"), 0.1, lambda i: i % (3 * STEPS) != 0),
            (send_transaction, tx_producer, 0.4, never),
        ]
        for send, made, interval, finish in plan:
            args = (send, made, ledger, interval, stop, finish)
            threads.append(threading.Thread(target=keep_sending, args=args, daemon=True))
        for thread in threads:
            thread.start()
        stop.wait(SOAK_SECONDS)  # the workload runs for its length; nothing is judged meanwhile
        stop.set()
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive(), "a producer did not stop"
        assert not ledger.problems, ledger.problems[:5]

        assert wait_until(lambda: not shortfall(ledger), timeout=180, interval=0.5), shortfall(ledger)
        dead: dict[str, str] = {}
        assert wait_until(
            lambda: dead.update(dead_letters(admin, ledger)) or len(dead) == len(ledger.sent_keys("dead")),
            timeout=60,
            interval=0.5,
        ), f"{len(dead)} of {len(ledger.sent_keys('dead'))} dead letters found"
        assert wait_until(lambda: set(lags(admin).values()) == {0}, timeout=60, interval=0.5), lags(admin)
        dlq_size = sum(admin.max_offset(cluster.broker_addr, f"%DLQ%{RETRYING}", q) for q in range(1))
        ends = {q: admin.max_offset(cluster.broker_addr, EVENTS, q) for q in range(QUEUES[EVENTS])}
        for consumer in consumers:
            consumer.shutdown()
        consumers.clear()
    finally:
        stop.set()
        for made in producers:
            made.shutdown()
        for consumer in consumers:
            consumer.shutdown()
        admin.close()
        cluster.stop()

    assert not ledger.problems, ledger.problems[:5]
    # Exactly what each group should get, each message once.
    for name, want in expected_deliveries(ledger).items():
        got = ledger.got[name]
        extra = got - want
        assert not extra, f"{name} got unexpected or repeated messages, e.g. {list(extra.items())[:3]}"
        assert got == want, f"{name}: {sum(got.values())} deliveries, {sum(want.values())} expected"
    sent = {kind: len(keys) for kind, keys in ledger.sent.items()}
    print(f"sent {sent}; deliveries { ({n: sum(c.values()) for n, c in ledger.got.items()}) }")
    assert all(sent.get(kind, 0) > 0 for kind in (EVENTS, DELAYED, ORDERS, "dead", *TX_OUTCOMES)), sent
    # Retries exactly as often as the failures asked: ok once, flaky twice, dead 1 + retryMaxTimes.
    want_attempts = {"ok": 1, "flaky": 2, "dead": 1 + RETRY_MAX_TIMES}
    for fate, times in want_attempts.items():
        wrong = {k: ledger.attempts[k] for k in ledger.sent[fate] if ledger.attempts[k] != times}
        assert not wrong, f"{fate} messages delivered other than {times} times: {list(wrong.items())[:3]}"
    # Dead letters: exactly the always-failing messages, with their bodies.
    assert dead == {k: f"retry {k.rsplit('-', 1)[1]}" for k in ledger.sent["dead"]}
    assert dlq_size == len(ledger.sent["dead"])
    # Rolled-back transactions never delivered; the unknown ones were settled by checks.
    assert not [k for k in ledger.got[TXG] if "rollback" in k]
    assert ledger.tx_checks["unknown-commit"] >= 1 and ledger.tx_checks["unknown-rollback"] >= 1
    # Every order's steps in order, each once.
    assert ledger.orders == expected_orders(ledger)
    # The broadcasting members' own offsets (kept locally) reached the end of every queue.
    for directory in bcast_dirs:
        assert broadcast_offsets(directory) == ends, directory


def _answers(call, *args):
    try:
        return call(*args)
    except Exception:
        return None
