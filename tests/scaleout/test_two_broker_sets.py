"""Two broker sets (issue 24, item 4): a topic on ``broker-a`` and ``broker-b``; producers spread
over both, a group's consumers share both sets' queues, the console's cluster, topic and group pages
show both, and with one set stopped sends go to the other while the console names the set down.

Real name server and brokers on loopback; the console pages through Django's test client in this
process (its database is the test database, the cluster the one started here).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

import pytest  # noqa: E402

from broker.client import ConsumeConcurrentlyStatus, Producer  # noqa: E402
from broker.client.admin import MQClientError  # noqa: E402
from broker.common.message import Message  # noqa: E402
from broker.local_cluster import wait_until  # noqa: E402
from core import cluster_access  # noqa: E402
from tests.cluster import logged_in_client  # noqa: E402
from tests.scaleout.broker_sets import SETS, start_two_sets, stored_per_set  # noqa: E402

pytestmark = pytest.mark.timeout(180)

TOPIC = "ScaleOutSpread"
QUEUES = 4  # per set: 8 queues in all
GROUP = "ScaleOutSpreadGroup"
HUNG_GROUP = "ScaleOutHungGroup"
PASSWORD = "correct horse battery staple 24"

viewer_client = logged_in_client("sets-viewer", "viewer", PASSWORD)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    cluster = start_two_sets(tmp_path_factory.mktemp("two-sets"), {TOPIC: QUEUES})
    yield cluster
    cluster_access.close_all()
    cluster.stop()


@pytest.fixture
def stopping_sets(tmp_path):
    """Two sets of the stop test's own: stopping one must not change the other tests' cluster."""
    cluster = start_two_sets(tmp_path / "two-sets", {TOPIC: QUEUES})
    yield cluster
    cluster_access.close_all()
    cluster.stop()


@pytest.fixture
def console_on(settings):
    """``console_on(cluster)``: the console's pages read ``cluster``."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

    def point(cluster) -> None:
        settings.BROKER_NAMESRV = cluster.namesrv_addr

    return point


def _send(producer: Producer, count: int, keys: str) -> list:
    results = []
    for i in range(count):
        message = Message(TOPIC, f"{keys} {i}".encode())
        message.keys = f"{keys}-{i}"
        results.append(producer.send(message))
    return results


def test_producers_spread_over_both_sets(sets):
    before = stored_per_set(sets, TOPIC, QUEUES)
    producers = [Producer(f"ScaleOutProducer{n}", sets.namesrv_addr).start() for n in range(2)]
    try:
        results = [r for n, p in enumerate(producers) for r in _send(p, 40, f"spread{n}")]
    finally:
        for producer in producers:
            producer.shutdown()
    per_set = Counter(r.message_queue.broker_name for r in results)
    per_queue = Counter((r.message_queue.broker_name, r.message_queue.queue_id) for r in results)
    print(f"sends per broker set: {dict(per_set)}; queues used: {len(per_queue)} of {2 * QUEUES}")
    assert {r.send_status for r in results} == {"SEND_OK"}
    # The producer goes round the topic's 8 queues: each set takes half of every producer's sends,
    # but for a send that failed on one set and was retried on the next queue, which is the other
    # set's (seen once in a fresh clone's full run: 41 and 39).
    assert set(per_set) == set(SETS) and sum(per_set.values()) == 80
    assert all(abs(count - 40) <= 2 for count in per_set.values()), per_set
    assert len(per_queue) == 2 * QUEUES
    # The brokers hold what the send results say they took.
    stored = stored_per_set(sets, TOPIC, QUEUES)
    assert {name: stored[name] - before[name] for name in SETS} == dict(per_set)


def test_consumers_rebalance_over_both_sets(sets, viewer_client, console_on):
    console_on(sets)
    seen: Counter = Counter()
    lock = threading.Lock()

    def listener(messages, context):
        with lock:
            seen.update(key for m in messages for key in m.keys)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumers = [sets.push_consumer(GROUP, TOPIC, listener, f"sets-consumer-{n}") for n in range(2)]
    try:

        def shared_out():
            # The topic's queues (each member also holds its share of the group's retry topic).
            # Rebalancing settles member by member, as in RocketMQ: for a moment the first member
            # may still hold a queue the second already took, so wait for the settled split.
            owned = [{mq for mq in c.assigned if mq.topic == TOPIC} for c in consumers]
            settled = len(owned[0] | owned[1]) == 2 * QUEUES and not owned[0] & owned[1]
            return owned if settled and all(owned) else None

        owned = wait_until(shared_out, timeout=60, what="both consumers owning the 8 queues between them")
        brokers_of = [{mq.broker_name for mq in queues} for queues in owned]
        print(f"queues per consumer: {[sorted((q.broker_name, q.queue_id) for q in o) for o in owned]}")
        # Each member holds half (RocketMQ's averaging strategy over the sorted queues: here one
        # set's queues each), and between them both sets' queues.
        assert [len(o) for o in owned] == [QUEUES, QUEUES]
        assert set().union(*brokers_of) == set(SETS)

        producer = Producer("ScaleOutRebalanceProducer", sets.namesrv_addr).start()
        try:
            sent = _send(producer, 40, "rebalance")
        finally:
            producer.shutdown()
        keys = {f"rebalance-{i}" for i in range(40)}
        wait_until(lambda: keys <= set(seen), timeout=30, what="the 40 messages consumed")
        assert all(seen[k] == 1 for k in keys), "a message was consumed twice"
        assert {r.message_queue.broker_name for r in sent} == set(SETS)

        # The group page: every queue of both sets, each with the member that holds it.
        page = viewer_client.get(f"/groups/{GROUP}/").content.decode()
        for consumer in consumers:
            for mq in [mq for mq in consumer.assigned if mq.topic == TOPIC]:
                row = f'<td>{mq.broker_name}</td><td class="num">{mq.queue_id}</td>'
                assert row in page, f"the group page lacks {mq.broker_name} queue {mq.queue_id}"
        client_ids = {c._client().client_id for c in consumers}
        assert all(cid in page for cid in client_ids)
    finally:
        for consumer in consumers:
            consumer.shutdown()


def test_cluster_and_topic_pages_show_both_sets(sets, viewer_client, console_on):
    console_on(sets)
    cluster_page = viewer_client.get("/cluster/").content.decode()
    for name in SETS:
        assert f"<td>{name}</td>" in cluster_page
        assert sets.brokers[name].addr in cluster_page
    assert cluster_page.count('<span class="badge badge-ok">up</span>') == 2

    topic_page = viewer_client.get(f"/topics/{TOPIC}/").content.decode()
    for name in SETS:
        assert f"<tr><td>{name}</td>" in topic_page  # its route row
        assert f"{sets.brokers[name].addr} (master)" in topic_page


def test_a_stopped_set_sends_go_to_the_other_and_the_console_says_which(
    stopping_sets, viewer_client, console_on
):
    from history.sampler import sample

    sets = stopping_sets
    console_on(sets)
    admin = cluster_access.admin_for(sets.namesrv_addr)
    sample(sets.namesrv_addr, admin)  # the beat task's cycle: the history knows both sets up
    producer = Producer("ScaleOutFailoverProducer", sets.namesrv_addr).start()  # fault tolerance on
    try:
        warm = _send(producer, 8, "warm")  # the route, with both sets, is cached
        assert {r.message_queue.broker_name for r in warm} == set(SETS)
        before = stored_per_set(sets, TOPIC, QUEUES)["broker-a"]
        sets.brokers["broker-b"].kill()
        after = _send(producer, 40, "after-kill")
        # A send that picked a broker-b queue failed, was retried on broker-a, and broker-b is
        # avoided from then on (the producer's latency fault tolerance).
        assert producer.faults is not None and not producer.faults.is_available("broker-b")
    finally:
        producer.shutdown()
    assert {r.send_status for r in after} == {"SEND_OK"}
    assert Counter(r.message_queue.broker_name for r in after) == {"broker-a": 40}
    assert stored_per_set(sets, TOPIC, QUEUES)["broker-a"] - before == 40

    def dropped() -> bool:
        return "broker-b" not in {d.broker_name for d in admin.cluster_info().brokers.values()}

    wait_until(dropped, timeout=30, what="the name server dropping broker-b")
    sample(sets.namesrv_addr, admin)  # the next cycle finds broker-b gone: stored as down

    cluster_page = viewer_client.get("/cluster/").content.decode()
    vanished = cluster_page.split('id="vanished-brokers"', 1)[1].split("</section>", 1)[0]
    assert "Broker set <strong>broker-b</strong> takes no messages" in vanished
    assert "<td>broker-b</td>" in vanished and "badge-bad" in vanished
    assert "<td>broker-a</td>" not in vanished
    assert "<td>broker-a</td>" in cluster_page.split('id="vanished-brokers"', 1)[0]  # listed, up

    topic_page = viewer_client.get(f"/topics/{TOPIC}/").content.decode()
    assert f"{sets.brokers['broker-a'].addr} (master)" in topic_page
    down_row = topic_page.split('<tr class="route-down">', 1)[1].split("</tr>", 1)[0]
    assert "<td>broker-b</td>" in down_row and "down" in down_row


def test_a_hung_set_costs_one_send_and_its_own_rows_only(stopping_sets, viewer_client, console_on):
    """broker-b frozen (SIGSTOP): still listed by the name server, answering nothing."""
    sets = stopping_sets
    console_on(sets)
    producer = Producer("ScaleOutHungProducer", sets.namesrv_addr).start()
    consumer = sets.push_consumer(
        HUNG_GROUP, TOPIC, lambda m, c: ConsumeConcurrentlyStatus.CONSUME_SUCCESS, "hung-c"
    )
    hung = sets.brokers["broker-b"].proc
    try:
        assert {r.message_queue.broker_name for r in _send(producer, 8, "warm")} == set(SETS)
        wait_until(lambda: len([q for q in consumer.assigned if q.topic == TOPIC]) == 2 * QUEUES, timeout=30)
        hung.send_signal(signal.SIGSTOP)
        landed: Counter[str] = Counter()
        failed: list[str] = []
        for i in range(20):
            try:
                landed[producer.send(Message(TOPIC, f"hung {i}".encode())).message_queue.broker_name] += 1
            except MQClientError as exc:
                failed.append(str(exc))
        print(f"with broker-b hung: sent to {dict(landed)}, failed {len(failed)}: {failed}")
        # As RocketMQ's producer: a send that waited out its timeout on the hung set has spent its
        # time budget and fails; the latency fault tolerance then keeps every later send off it.
        assert len(failed) <= 1 and landed == {"broker-a": 20 - len(failed)}
        assert producer.faults is not None and not producer.faults.is_available("broker-b")

        cluster_page = viewer_client.get("/cluster/").content.decode()
        row_b = cluster_page.split(f"{sets.brokers['broker-b'].addr}</a>", 1)[1].split("</tr>", 1)[0]
        assert "unreachable" in row_b

        response = viewer_client.get(f"/topics/{TOPIC}/")
        assert response.status_code == 200  # was 503 for the whole page
        topic_page = response.content.decode()
        row_b = topic_page.split("<tr><td>broker-b", 1)[1].split("</tr>", 1)[0]
        assert "down: not answering" in row_b
        assert "down: not answering" not in topic_page.split("<tr><td>broker-a", 1)[1].split("</tr>", 1)[0]
        for queue_id in range(QUEUES):  # broker-a's queue offsets are there
            assert f'<tr><td>broker-a</td><td class="num">{queue_id}</td>' in topic_page

        response = viewer_client.get(f"/groups/{HUNG_GROUP}/")
        assert response.status_code == 200  # was 503 for the whole page
        group_page = response.content.decode()
        assert "Broker set <strong>broker-b</strong> did not answer" in group_page
        for queue_id in range(QUEUES):  # broker-a's queues, with the member holding each
            assert f'<td>broker-a</td><td class="num">{queue_id}</td>' in group_page
        assert "<td>broker-b</td>" not in group_page
        assert consumer._client().client_id in group_page  # the online client, told by broker-a
    finally:
        hung.send_signal(signal.SIGCONT)
        producer.shutdown()
        consumer.shutdown()
