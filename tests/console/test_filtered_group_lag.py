"""Issue 19.1 as the console shows it: a caught-up group with a tag filter reads lag 0 on the group
list, on the group's page and in the ``rocketmq_group_lag`` gauge of /metrics, also where a queue
holds only messages its filter skips."""

from __future__ import annotations

import re
import threading

import pytest
from django.test import Client

from broker.client import CONSUME_FROM_FIRST_OFFSET, MessageQueue
from broker.client.producer import Producer
from broker.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker.common.message import Message
from broker.local_cluster import wait_until
from core.cluster_queries import group_rows
from tests.cluster import CLI_CLUSTER as CLUSTER

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "ConsoleFilteredLag", "console-filtered-group"
# Per broker and queue, in send order: W has the subscribed tag, o another one. Two of the four
# queues hold only messages the group never sees.
LAYOUT = {("broker-a", 0): "oW", ("broker-a", 1): "oo", ("broker-b", 0): "o", ("broker-b", 1): "ooW"}
WITHIN_S = 30


@pytest.fixture(scope="module")
def filtered_group(live_cluster):
    """The messages of LAYOUT sent, and a consumer subscribed to tag W that received all its own."""
    from core.cluster_access import admin_for

    admin = admin_for(live_cluster.namesrv_addr)
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, TOPIC, 2, 2)
    producer = Producer("console-filtered-producer", live_cluster.namesrv_addr).start()
    wanted = set()
    try:
        for (broker_name, queue_id), kinds in LAYOUT.items():
            for i, kind in enumerate(kinds):
                msg = Message(TOPIC, f"{broker_name}-{queue_id}-{i}".encode())
                msg.tags = "W" if kind == "W" else "Other"
                producer.send(msg, queue=MessageQueue(TOPIC, broker_name, queue_id))
                if kind == "W":
                    wanted.add(msg.body)
    finally:
        producer.shutdown()
    received, arrived = [], threading.Event()

    def listener(messages, context):
        received.extend(m.body for m in messages)
        if set(received) >= wanted:
            arrived.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP,
        live_cluster.namesrv_addr,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        persist_interval_ms=200,
    )
    consumer.subscribe(TOPIC, "W")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert arrived.wait(20), received
        assert sorted(received) == sorted(wanted)
        yield admin
    finally:
        consumer.shutdown()


def _lag_of_group_list(client: Client) -> int | None:
    response = client.get("/groups/", {"q": GROUP})
    assert response.status_code == 200
    [row] = [r for r in response.context["rows"] if r.name == GROUP]
    assert not row.error, row.error
    return row.lag


def test_group_list_and_page_show_no_lag_for_a_caught_up_filtered_group(viewer_client, filtered_group):
    assert wait_until(lambda: _lag_of_group_list(viewer_client) == 0, WITHIN_S, 0.2), _lag_of_group_list(
        viewer_client
    )
    [row] = group_rows(filtered_group, names=[GROUP])  # what the list and the alerts read
    assert row.lag == 0
    page = viewer_client.get(f"/groups/{GROUP}/")
    assert page.status_code == 200
    queues = {
        (q.broker_name, q.queue_id): (q.broker_offset, q.consumer_offset, q.diff)
        for q, _ in page.context["queues"]
        if q.topic == TOPIC
    }
    assert queues == {key: (len(kinds), len(kinds), 0) for key, kinds in LAYOUT.items()}
    html = page.content.decode()
    assert "Progress per queue" in html and TOPIC in html


METRICS_TOKEN = "lag-scraper-token"


def _group_lag_gauge() -> float | None:
    text = Client().get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).content.decode()
    found = re.search(rf'^rocketmq_group_lag\{{group="{GROUP}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def test_metrics_lag_of_a_caught_up_filtered_group_is_zero(live_cluster, filtered_group, settings):
    settings.BROKER_NAMESRV = live_cluster.namesrv_addr
    settings.CONSOLE_METRICS_CACHE_SECONDS = 0
    settings.CONSOLE_METRICS_TOKEN = METRICS_TOKEN
    assert wait_until(lambda: _group_lag_gauge() == 0.0, WITHIN_S, 0.2), _group_lag_gauge()
