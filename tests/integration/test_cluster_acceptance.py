"""Issue acceptance: producers and consumer groups against a name server and two brokers."""

import asyncio
import threading
import time

import pytest

from broker.client import (
    BROADCASTING,
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    MessageQueue,
    Producer,
    PushConsumer,
)
from broker.client.admin import MQAdmin
from broker.common.codes import RequestCode
from broker.common.message import Message, MessageExt
from broker.local_cluster import SMALL_STORE_CONF, free_port, start_namesrv, wait_until
from broker.local_cluster import start_broker as launch_broker
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.polling import gathered
from tests.received_messages import DeliveryCounts

TOPIC = "Acceptance"


def start_broker(namesrv, base, name, port):
    conf = base / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName=AcceptCluster\nbrokerName={name}\nlistenPort={port}\nnamesrvAddr={namesrv}\n"
        f"storePathRootDir={base / name}\nregisterBrokerIntervalMillis=1000\n{SMALL_STORE_CONF}"
    )
    return launch_broker(conf)


@pytest.fixture
def cluster(tmp_path):
    namesrv = start_namesrv()
    ports = {"broker-a": free_port(), "broker-b": free_port()}
    brokers = {}
    try:
        for name, port in ports.items():
            brokers[name] = start_broker(namesrv.addr, tmp_path, name, port)
    except RuntimeError:  # a broker that cannot start must not leave the others running
        for process in [*brokers.values(), namesrv]:
            process.stop()
        raise
    admin = SyncRemotingClient()
    for process in brokers.values():
        create = {"topic": TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
        assert admin.invoke(process.addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).ok
    admin.close()
    state = {"namesrv": namesrv, "brokers": brokers, "ports": ports, "base": tmp_path}
    yield state
    for process in state["brokers"].values():
        process.stop()
    namesrv.stop()


def make_consumer(namesrv, group, name, recorder, **options):
    consumer = PushConsumer(
        group,
        namesrv,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        instance_name=name,
        rebalance_interval_ms=1000,
        persist_interval_ms=500,
        **options,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(recorder.listener)
    return consumer.start()


def owned(consumers):
    # Only the test topic's queues: push consumers also own their group's %RETRY% queues.
    return [{mq for mq in c.assigned if mq.topic == TOPIC} for c in consumers]


def test_twenty_thousand_messages_clustering_and_broadcasting(cluster, tmp_path):
    namesrv = cluster["namesrv"].addr
    clustering = DeliveryCounts()
    group = [make_consumer(namesrv, "cluster-group", f"c{i}", clustering) for i in range(3)]
    broadcast = [DeliveryCounts(), DeliveryCounts()]
    members = [
        make_consumer(
            namesrv,
            "broadcast-group",
            f"b{i}",
            rec,
            message_model=BROADCASTING,
            offset_store_dir=str(tmp_path / f"offsets{i}"),
        )
        for i, rec in enumerate(broadcast)
    ]
    # Wait for a stable split: 8 queues, each owned by exactly one member.
    assert wait_until(
        lambda: sorted(len(s) for s in owned(group)) == [2, 3, 3] and len(set().union(*owned(group))) == 8
    )
    settled = [c.rebalance_history[-1][0] for c in group]

    # 5,000 async sends are in flight at once, each timed from its call: a generous timeout so a
    # loaded test machine cannot fail them (the test is about delivery, not speed).
    producer = Producer("acceptance-producer", namesrv, send_timeout_ms=30_000).start()
    sent = []
    for i in range(5000):
        body = b"single-%d" % i
        assert producer.send(Message(TOPIC, body)).send_status == "SEND_OK"
        sent.append(body)
    futures = []
    for i in range(5000):
        body = b"async-%d" % i
        futures.append(producer.send_async(Message(TOPIC, body)))
        sent.append(body)
    assert all(f.result(30).send_status == "SEND_OK" for f in futures)
    for i in range(5000):
        body = b"oneway-%d" % i
        producer.send_oneway(Message(TOPIC, body))
        sent.append(body)
    for start in range(0, 5000, 100):
        batch = [Message(TOPIC, b"batch-%d" % i) for i in range(start, start + 100)]
        assert all(r.send_status == "SEND_OK" for r in producer.send_batch(batch))
        sent += [m.body for m in batch]
    assert len(set(sent)) == 20_000

    assert wait_until(lambda: set(sent) <= set(clustering.seen), timeout=120), (
        f"clustering group got {len(set(clustering.seen) & set(sent))} of 20000"
    )
    for recorder in broadcast:

        def got_all(r: DeliveryCounts = recorder) -> bool:
            return set(sent) <= set(r.seen)

        assert wait_until(got_all, timeout=120)
    duplicates = {body: n for body, n in clustering.seen.items() if n > 1}
    rebalanced = any(c.rebalance_history[-1][0] > t for c, t in zip(group, settled, strict=True))
    # At-least-once: duplicates may only come from queues changing owner after the split settled.
    assert not duplicates or rebalanced, f"{len(duplicates)} duplicates without a rebalance"
    print(
        f"clustering: {sum(clustering.seen.values())} deliveries, {len(duplicates)} duplicates; "
        f"broadcast members: {[len(r.seen) for r in broadcast]}"
    )
    for consumer in group + members:
        consumer.shutdown()
    producer.shutdown()


def test_consumer_loss_and_broker_restart(cluster):
    namesrv = cluster["namesrv"].addr
    recorder = DeliveryCounts()
    group = [make_consumer(namesrv, "failover-group", f"f{i}", recorder) for i in range(3)]
    assert wait_until(lambda: len(set().union(*owned(group))) == 8 and sum(map(len, owned(group))) == 8)
    producer = Producer("failover-producer", namesrv, send_timeout_ms=3000).start()
    first = [b"before-%d" % i for i in range(300)]
    for body in first:
        producer.send(Message(TOPIC, body))
    assert wait_until(lambda: set(first) <= set(recorder.seen))

    # A consumer leaves: the two others take all eight queues and continue.
    lost = group.pop()
    lost.shutdown()
    assert wait_until(
        lambda: sorted(len(s) for s in owned(group)) == [4, 4] and len(set().union(*owned(group))) == 8
    )
    second = [b"after-loss-%d" % i for i in range(300)]
    for body in second:
        producer.send(Message(TOPIC, body))
    assert wait_until(lambda: set(second) <= set(recorder.seen))

    # broker-b restarts: sends fail over to broker-a meanwhile; nothing acknowledged is lost.
    assert cluster["brokers"]["broker-b"].stop() == 0
    during = [b"during-restart-%d" % i for i in range(200)]
    acknowledged = [body for body in during if producer.send(Message(TOPIC, body)).send_status == "SEND_OK"]
    assert acknowledged == during
    cluster["brokers"]["broker-b"] = start_broker(
        namesrv, cluster["base"], "broker-b", cluster["ports"]["broker-b"]
    )
    after = [b"after-restart-%d" % i for i in range(300)]
    for body in after:
        producer.send(Message(TOPIC, body))
    assert wait_until(lambda: set(first + second + during + after) <= set(recorder.seen), timeout=90)
    for consumer in group:
        consumer.shutdown()
    producer.shutdown()


def test_lite_pull_consumer_assign_seek_commit(cluster):
    namesrv = cluster["namesrv"].addr
    producer = Producer("lite-producer", namesrv).start()
    queue = MessageQueue(TOPIC, "broker-a", 0)
    for i in range(20):
        producer.send(Message(TOPIC, b"lite-%d" % i), queue=queue)
    consumer = LitePullConsumer(
        "lite-group", namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name="lite"
    )
    consumer.assign([queue])
    consumer.start()
    got: list[MessageExt] = []
    assert wait_until(lambda: len(gathered(got, consumer.poll(0.5))) >= 20, timeout=30)
    assert [m.body for m in got] == [b"lite-%d" % i for i in range(20)]
    consumer.commit_sync()
    consumer.seek(queue, 15)
    again: list[MessageExt] = []
    assert wait_until(lambda: len(gathered(again, consumer.poll(0.5))) >= 5, timeout=30)
    assert [m.body for m in again][:5] == [b"lite-%d" % i for i in range(15, 20)]
    consumer.shutdown()
    producer.shutdown()


def committed_and_max(admin, cluster, group):
    """Each queue of TOPIC on every broker: (the group's committed offset, the queue's max offset)."""
    return [
        (admin.query_consumer_offset(p.addr, group, TOPIC, q), admin.max_offset(p.addr, TOPIC, q))
        for p in cluster["brokers"].values()
        for q in range(4)
    ]


def all_committed(admin, cluster, group) -> bool:
    return all(committed == top for committed, top in committed_and_max(admin, cluster, group))


def reset_to_first(admin, cluster, group) -> None:
    for process in cluster["brokers"].values():
        reset = {"topic": TOPIC, "group": group, "timestamp": 0, "isForce": True}
        answer = admin.invoke(process.addr, create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset))
        assert answer.ok, answer.remark


def test_reset_offset_rewinds_an_online_consumer_and_running_info(cluster):
    namesrv = cluster["namesrv"].addr
    producer = Producer("reset-producer", namesrv).start()
    bodies = [b"reset-%d" % i for i in range(40)]
    for body in bodies:
        producer.send(Message(TOPIC, body))
    recorder = DeliveryCounts()
    consumer = make_consumer(namesrv, "reset-group", "r0", recorder)
    admin, mqadmin = SyncRemotingClient(), MQAdmin(namesrv)
    try:
        assert wait_until(lambda: set(bodies) <= set(recorder.seen))
        # The group's progress is committed, so that the reset rewinds committed progress.
        assert wait_until(lambda: all_committed(mqadmin, cluster, "reset-group"), timeout=30), (
            committed_and_max(mqadmin, cluster, "reset-group")
        )
        reset_to_first(admin, cluster, "reset-group")
        assert wait_until(lambda: all(recorder.seen[b] >= 2 for b in bodies)), [
            b for b in bodies if recorder.seen[b] < 2
        ]
        client_id = consumer.instance.client_id
        fields = {"consumerGroup": "reset-group", "clientId": client_id}
        info = admin.invoke(
            cluster["brokers"]["broker-a"].addr,
            create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields),
            10_000,
        )
        assert info.ok and b'"consumerGroup":"reset-group"' in info.body
    finally:
        admin.close()
        mqadmin.close()
        consumer.shutdown()
        producer.shutdown()


def test_a_reset_the_consumer_handles_late_is_not_undone_by_its_own_old_commits(cluster):
    """Between the broker's reset and the consumer handling it, the consumer goes on committing
    its old progress (persist loop, pull commit flags); the reset must still rewind it."""
    namesrv = cluster["namesrv"].addr
    producer = Producer("late-reset-producer", namesrv).start()
    bodies = [b"late-reset-%d" % i for i in range(40)]
    for body in bodies:
        producer.send(Message(TOPIC, body))
    recorder = DeliveryCounts()
    consumer = make_consumer(namesrv, "late-reset-group", "lr0", recorder)
    admin, mqadmin = SyncRemotingClient(), MQAdmin(namesrv)
    release = threading.Event()

    async def rebalance_under_way():  # a slow rebalance (a busy machine) holds the reset back
        async with consumer._rebalancing:
            await asyncio.to_thread(release.wait, 60)

    try:
        assert wait_until(lambda: set(bodies) <= set(recorder.seen))
        assert wait_until(lambda: all_committed(mqadmin, cluster, "late-reset-group"), timeout=30)
        holding = consumer.instance.submit(rebalance_under_way())
        assert wait_until(consumer._rebalancing.locked, timeout=10)
        reset_to_first(admin, cluster, "late-reset-group")
        # The consumer's persist loop (every 500 ms) commits its old progress over the reset.
        assert wait_until(lambda: all_committed(mqadmin, cluster, "late-reset-group"), timeout=30)
        release.set()
        holding.result(10)
        assert wait_until(lambda: all(recorder.seen[b] >= 2 for b in bodies)), [
            b for b in bodies if recorder.seen[b] < 2
        ]
    finally:
        release.set()
        admin.close()
        mqadmin.close()
        consumer.shutdown()
        producer.shutdown()


def test_asyncio_consumers(cluster):
    from broker.client import AsyncLitePullConsumer, AsyncPushConsumer

    namesrv = cluster["namesrv"].addr
    producer = Producer("asyncio-producer", namesrv).start()
    bodies = [b"aio-%d" % i for i in range(30)]
    for body in bodies:
        producer.send(Message(TOPIC, body))

    async def scenario():
        seen: set[bytes] = set()
        done = asyncio.Event()
        loop_thread = threading.get_ident()
        on_loop = []

        async def listener(messages, context):
            on_loop.append(threading.get_ident() == loop_thread)  # async listeners run on our loop
            seen.update(m.body for m in messages)
            if set(bodies) <= seen:
                done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        push = AsyncPushConsumer(
            "asyncio-push",
            namesrv,
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
            instance_name="aio-push",
            rebalance_interval_ms=1000,
        )
        push.subscribe(TOPIC)
        push.register_message_listener(listener)
        await push.start()
        await asyncio.wait_for(done.wait(), 60)
        await push.shutdown()

        lite = AsyncLitePullConsumer(
            "asyncio-lite", namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name="aio-lite"
        )
        lite.subscribe(TOPIC)
        await lite.start()
        polled: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not set(bodies) <= polled and time.monotonic() < deadline:
            polled.update(m.body for m in await lite.poll(0.5))
        await lite.commit()
        await lite.shutdown()
        return on_loop, polled

    on_loop, polled = asyncio.run(scenario())
    assert on_loop and all(on_loop)
    assert set(bodies) <= polled
    producer.shutdown()
