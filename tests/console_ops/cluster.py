"""A real name server and broker for the operations-page tests (short delay levels, fast checks)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.cli.live_cluster import start_namesrv
from tests.harness import EngineProcess, free_port, keep_draining

CLUSTER = "OpsCluster"
# Level 1 and 2 deliver quickly; level 3 (1 h) keeps messages pending for the delayed pages.
DELAY_LEVELS = "1s 2s 1h"


def start_broker(workdir: Path, namesrv_addr: str, name: str = "broker-ops") -> EngineProcess:
    conf = workdir / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName={name}\nbrokerId=0\n"
        f"storePathRootDir={workdir / name}\nautoCreateTopicEnable=true\n"
        "autoCreateSubscriptionGroup=true\n"
        # Small store files: the defaults (1 GiB commit-log segments, a 420 MB index) would fill the
        # disk every engineer's test runs share.
        "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=120000\n"
        "maxHashSlotNum=20000\nmaxIndexNum=80000\n"
        f"messageDelayLevel={DELAY_LEVELS}\nflushDelayOffsetInterval=200\n"
        # The checker must not resolve the tests' half messages behind their back.
        "transactionCheckInterval=3600000\ntransactionTimeOut=3600000\n"
    )
    args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv_addr]
    return keep_draining(EngineProcess(args))


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value (state lives in other processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


__all__ = ["CLUSTER", "DELAY_LEVELS", "start_broker", "start_namesrv", "wait_until"]


def send(namesrv_addr: str, topic: str, count: int = 1, keys: str = "k", tags: str = "t", **props):
    """Send ``count`` messages (keys ``<keys>-<i>``); returns the SendResults."""
    from broker.client import Producer
    from broker.common.message import Message

    producer = Producer("OPS_TEST_PRODUCER", namesrv_addr).start()
    try:
        results = []
        for i in range(count):
            msg = Message(topic, f'{{"n": {i}, "topic": "{topic}"}}'.encode())
            msg.keys, msg.tags = f"{keys}-{i}", tags
            for name, value in props.items():
                msg.put_property(name, str(value))
            results.append(producer.send(msg))
        return results
    finally:
        producer.shutdown()


def make_dead_letters(namesrv_addr: str, topic: str, group: str, count: int, keys: str = "dead"):
    """Messages a real push consumer fails on with no retries left: the broker dead-letters them."""
    from broker.client import ConsumeConcurrentlyStatus, PushConsumer
    from broker.client.admin import MQAdmin, NotFoundError
    from broker.client.consumer_core import CONSUME_FROM_FIRST_OFFSET

    send(namesrv_addr, topic, count, keys=keys, tags="dl")
    consumer = PushConsumer(
        group,
        namesrv_addr,
        max_reconsume_times=0,
        retry_delay_s=0.2,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=1000,  # queues soon even if the broker lists the member a moment late
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    consumer.start()
    try:
        with MQAdmin(namesrv_addr) as admin:

            def dead() -> bool:
                try:
                    return sum(q.max_offset for q in admin.topic_status(f"%DLQ%{group}").queues) >= count
                except NotFoundError:
                    return False

            wait_until(dead, timeout=30, what=f"{count} dead letters of {group}")
    finally:
        consumer.shutdown()
