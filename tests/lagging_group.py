"""A consumer group really behind: its consumer read the first messages of a topic, committed, and
stopped; more messages arrived since. Shared by the overview's console and browser tests."""

from __future__ import annotations

import threading

from broker.local_cluster import wait_until
from tests.cluster import send

WITHIN_S = 30


def make_lagging_group(
    namesrv_addr: str, admin, topic: str, group: str, consumed: int = 2, behind: int = 7
) -> int:
    """Create ``topic`` on every master, let a consumer of ``group`` read ``consumed`` messages and
    stop, then send ``behind`` more; returns the group's lag once the brokers report it."""
    from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
    from broker.client.push_consumer import ConsumeConcurrentlyStatus
    from core.cluster_queries import group_rows

    for cluster in admin.cluster_info().clusters:
        for addr in admin.resolve_masters(None, cluster):
            admin.create_or_update_topic(addr, topic, 2, 2)
    send(namesrv_addr, topic, consumed, keys="read")
    received: list[bytes] = []
    all_read = threading.Event()

    def listener(messages, context):
        received.extend(m.body for m in messages)
        if len(received) >= consumed:
            all_read.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET, persist_interval_ms=200
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert all_read.wait(WITHIN_S), f"the consumer read {len(received)} of {consumed}"
    finally:
        consumer.shutdown()  # commits its offsets: the group stays known with what it read
    send(namesrv_addr, topic, behind, keys="unread")

    def lag() -> int:
        [row] = group_rows(admin, names=[group])
        return 0 if row.error else row.lag

    assert wait_until(lambda: lag() >= behind, WITHIN_S, 0.2), f"lag {lag()} never reached {behind}"
    return lag()
