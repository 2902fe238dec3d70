"""The asyncio API (C7) against a real name server and broker: producers and consumers that run
on the application's own loop (uvloop and the standard loop), their failure paths, and that
they leave no task or thread behind."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import uvloop

from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    AsyncLitePullConsumer,
    AsyncProducer,
    AsyncPushConsumer,
    ConsumeConcurrentlyStatus,
    MQClientError,
    Producer,
    PushConsumer,
    create_reply_message,
)
from broker.client.admin import MQAdmin
from broker.client.instance import MQClientInstance
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.remoting.command import create_request
from tests.cluster import ONE_BROKER, cluster_fixture, start
from tests.listener_failures import ListenerFailures

SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


# Every retry level is 1 s, so a retry chain to the DLQ stays short.
cluster = cluster_fixture(ONE_BROKER, {"messageDelayLevel": "1s 1s 1s 1s"})


@pytest.fixture(params=sorted(LOOPS))
def run(request):
    return LOOPS[request.param]


def client_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(("mq-client-", "consume-"))]


def other_tasks() -> set:
    return asyncio.all_tasks() - {asyncio.current_task()}


async def pull_bodies(namesrv: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = AsyncLitePullConsumer(
        group, namesrv, consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name=group
    )
    consumer.subscribe(topic)
    bodies: list[bytes] = []
    async with consumer:
        for _ in range(100):
            bodies += [m.body for m in await consumer.poll(0.5)]
            if len(bodies) >= count:
                break
    return bodies


def test_async_producer_sends_every_way_on_the_callers_loop(cluster, run, request):
    topic = f"AsyncSend_{request.node.callspec.id}"
    cluster.create_topic(topic, 4)

    async def scenario():
        async with AsyncProducer("async-producer", cluster.namesrv_addr, instance_name="ap") as producer:
            assert not client_threads()  # no loop thread of its own
            first = await producer.send(Message(topic, b"sync-0"))
            assert first.send_status == "SEND_OK" and first.message_queue.topic == topic
            more = [await producer.send(Message(topic, f"sync-{i}".encode())) for i in range(1, 20)]
            futures = [producer.send_async(Message(topic, f"async-{i}".encode())) for i in range(50)]
            results = await asyncio.gather(*futures)
            assert {r.send_status for r in [*more, *results]} == {"SEND_OK"}
            assert len({r.msg_id for r in results}) == 50
            await producer.send_oneway(Message(topic, b"oneway"))
            batch = await producer.send_batch([Message(topic, f"batch-{i}".encode()) for i in range(10)])
            assert [r.send_status for r in batch] == ["SEND_OK"]
            queue = first.message_queue
            pinned = await producer.send(Message(topic, b"pinned"), queue=queue)
            assert pinned.message_queue == queue
        assert not other_tasks() and not client_threads()
        return await pull_bodies(cluster.namesrv_addr, topic, f"check-{topic}", 82)

    bodies = run(scenario())
    expected = {f"sync-{i}" for i in range(20)} | {f"async-{i}" for i in range(50)}
    expected |= {f"batch-{i}" for i in range(10)} | {"oneway", "pinned"}
    assert {b.decode() for b in bodies} == expected


def test_request_reply_between_asyncio_clients(cluster, run, request):
    # Own names per loop: each run is a fresh application.
    tag = request.node.callspec.id
    topic = f"AsyncRequest_{tag}"
    cluster.create_topic(topic, 2)

    async def scenario():
        responder = AsyncProducer(
            f"async-responder-p-{tag}", cluster.namesrv_addr, instance_name=f"arp-{tag}"
        )
        await responder.start()

        async def answer(messages, context):
            for msg in messages:
                await responder.send(create_reply_message(msg, b"re:" + msg.body))
            return SUCCESS

        consumer = AsyncPushConsumer(
            f"async-responder-{tag}",
            cluster.namesrv_addr,
            instance_name=f"arc-{tag}",
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(answer)
        await consumer.start()
        try:
            async with AsyncProducer(
                f"requester-{tag}", cluster.namesrv_addr, instance_name=f"rq-{tag}"
            ) as req:
                replies = await asyncio.gather(
                    *(req.request(Message(topic, f"q{i}".encode()), 10_000) for i in range(5))
                )
        finally:
            await consumer.shutdown()
            await responder.shutdown()
        assert not other_tasks()
        return [r.body for r in replies]

    assert run(scenario()) == [f"re:q{i}".encode() for i in range(5)]


def test_async_push_consumer_awaits_a_coroutine_listener_on_the_loop(cluster, run, request):
    topic = f"AsyncPush_{request.node.callspec.id}"
    cluster.create_topic(topic, 4)

    async def scenario():
        loop = asyncio.get_running_loop()
        seen: set[bytes] = set()
        done = asyncio.Event()
        threads: set[str] = set()
        failures = ListenerFailures()

        @failures.watch
        async def listener(messages, context):
            assert asyncio.get_running_loop() is loop
            threads.add(threading.current_thread().name)
            await asyncio.sleep(0)
            seen.update(m.body for m in messages)
            if len(seen) == 100:
                done.set()
            return SUCCESS

        consumer = AsyncPushConsumer(
            f"g-{topic}",
            cluster.namesrv_addr,
            instance_name=f"c-{topic}",
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
            consume_concurrency=4,
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with AsyncProducer(f"p-{topic}", cluster.namesrv_addr, instance_name=f"p-{topic}") as producer:
            await consumer.start()
            await asyncio.gather(*(producer.send_async(Message(topic, b"%d" % i)) for i in range(100)))
            try:
                await failures.wait_async(done.wait(), 30)
            finally:
                await consumer.shutdown()
        assert not other_tasks() and not client_threads()
        return seen, threads

    seen, threads = run(scenario())
    assert seen == {b"%d" % i for i in range(100)}
    assert threads == {threading.main_thread().name}


def test_a_failing_coroutine_listener_is_retried_then_dead_lettered(cluster):
    cluster.create_topic("AsyncFail", 1)
    group = "async-failing"

    async def scenario():
        deliveries: list[int] = []
        second = asyncio.Event()

        async def listener(messages, context):
            deliveries.append(messages[0].reconsume_times)
            if len(deliveries) >= 2:
                second.set()
            raise RuntimeError("always fails")

        consumer = AsyncPushConsumer(
            group,
            cluster.namesrv_addr,
            instance_name="failing",
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
            max_reconsume_times=1,
        )
        consumer.subscribe("AsyncFail")
        consumer.register_message_listener(listener)
        await consumer.start()
        async with AsyncProducer("async-failing-p", cluster.namesrv_addr, instance_name="afp") as producer:
            await producer.send(Message("AsyncFail", b"poison"))
        await asyncio.wait_for(second.wait(), 30)
        dead = 0
        for _ in range(100):  # the second failure goes to %DLQ%<group>
            dead = dlq_count(cluster, group)
            if dead:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # a third delivery would have come by now
        await consumer.shutdown()
        return deliveries, dead

    deliveries, dead = asyncio.run(scenario())
    assert deliveries == [0, 1] and dead == 1


def dlq_count(cluster, group: str) -> int:
    request = create_request(RequestCode.GET_MAX_OFFSET, {"topic": f"%DLQ%{group}", "queueId": 0})
    response = cluster.admin.invoke(cluster.broker_addr, request)
    return int(response.ext_fields.get("offset", 0)) if response.ok else 0


def test_a_plain_listener_of_the_async_consumer_runs_on_consume_threads(cluster):
    cluster.create_topic("AsyncPlain", 2)

    async def scenario():
        seen: list[tuple[bytes, str]] = []
        all_seen = threading.Event()

        def listener(messages, context):
            seen.extend((m.body, threading.current_thread().name) for m in messages)
            if len(seen) >= 10:
                all_seen.set()
            return SUCCESS

        consumer = AsyncPushConsumer(
            "async-plain",
            cluster.namesrv_addr,
            instance_name="plain",
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("AsyncPlain")
        consumer.register_message_listener(listener)
        await consumer.start()
        async with AsyncProducer("async-plain-p", cluster.namesrv_addr, instance_name="app") as producer:
            for i in range(10):
                await producer.send(Message("AsyncPlain", b"%d" % i))
        assert await asyncio.to_thread(all_seen.wait, 30)
        await consumer.shutdown()
        assert not other_tasks() and not client_threads()
        return seen

    seen = asyncio.run(scenario())
    assert {body for body, _ in seen} == {b"%d" % i for i in range(10)}
    assert all(name.startswith("consume-async-plain") for _, name in seen)


def test_blocking_calls_on_the_clients_own_loop_are_refused_not_deadlocked(cluster):
    async def scenario():
        instance = MQClientInstance.on_running_loop(cluster.namesrv_addr, "refuse")
        producer = Producer("refused", cluster.namesrv_addr, instance=instance).start()
        try:
            with pytest.raises(MQClientError, match="asyncio API"):
                instance.run(instance.route("TBW102"))
            with pytest.raises(MQClientError, match="asyncio API"):
                producer.send(Message("AnyTopic", b"x"))
            # From another thread the same blocking call works: it is handed to the loop.
            route = await asyncio.to_thread(instance.run, instance.route("TBW102", refresh=True), 5)
            assert route is not None
        finally:
            producer.instance = None
            await instance.ashutdown()
        assert not other_tasks()

    asyncio.run(scenario())


def test_unknown_topic_without_auto_create_is_rocketmqs_error(tmp_path):
    cluster = start(ONE_BROKER, tmp_path, {"autoCreateTopicEnable": "false"})
    try:

        async def scenario():
            async with AsyncProducer("no-auto", cluster.namesrv_addr, instance_name="noauto") as producer:
                with pytest.raises(MQClientError) as sent:
                    await producer.send(Message("NoSuchTopic", b"x"))
                with pytest.raises(MQClientError) as started:
                    await producer.send_async(Message("NoSuchTopic", b"x"))
            return sent.value, started.value

        for error in asyncio.run(scenario()):
            assert error.response_code == ResponseCode.TOPIC_NOT_EXIST, error
            assert "NoSuchTopic" in str(error)
    finally:
        cluster.stop()


def test_broker_down_gives_a_clear_error(tmp_path):
    cluster = start(ONE_BROKER, tmp_path)
    try:
        cluster.create_topic("Doomed", 2)

        async def scenario():
            async with AsyncProducer("doomed", cluster.namesrv_addr, instance_name="doomed") as producer:
                await producer.send(Message("Doomed", b"before"))  # route and connection cached
                await asyncio.to_thread(cluster.broker.stop)
                with pytest.raises(MQClientError) as fast:
                    await producer.send(Message("Doomed", b"after"), timeout_ms=2000)
                with pytest.raises(MQClientError) as by_future:
                    await producer.send_async(Message("Doomed", b"after"))
            return fast.value, by_future.value

        for error in asyncio.run(scenario()):
            # Attempts that failed, or (once the name server dropped the stopped broker and a
            # failed send refreshed the route) RocketMQ's words for a topic left without a route.
            text = str(error)
            assert "Doomed" in text and ("failed after retries" in text or "no route info" in text)
    finally:
        cluster.stop()


def test_one_process_runs_a_consumer_group_once_per_client_id(cluster):
    """A second consumer of a group under the same client id (default instance name) would be
    the same member to the broker and consume every message again: it is refused, as RocketMQ
    refuses it. A producer and a consumer of the process share the client's loop thread."""
    topic = "SharedInstance"
    cluster.create_topic(topic, 4)
    received: list[bytes] = []

    def listener(messages, context):
        received.extend(m.body for m in messages)
        return SUCCESS

    def consumer(group: str) -> PushConsumer:
        made = PushConsumer(group, cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
        made.subscribe(topic)
        made.register_message_listener(listener)
        return made

    first = consumer("shared-group").start()
    producer = Producer("shared-producer", cluster.namesrv_addr).start()
    try:
        with pytest.raises(MQClientError, match=r"consumer group\[shared-group\] has been created before"):
            consumer("shared-group").start()
        assert producer.instance is first.instance
        assert len([name for name in client_threads() if name.startswith("mq-client-")]) == 1
        for i in range(40):
            producer.send(Message(topic, b"m%d" % i))
        deadline = time.monotonic() + 20
        while len(received) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a duplicate would arrive right behind
        assert sorted(received) == sorted(b"m%d" % i for i in range(40))  # each once

        # The consumer leaves while the instance goes on serving the producer: its group is
        # unregistered from the broker at once, not when the connection closes or expires.
        first.shutdown()
        assert producer.instance is not None and producer.instance.loop_thread is not None
        assert producer.instance.loop_thread.alive
        with MQAdmin(cluster.namesrv_addr) as admin, pytest.raises(MQClientError):
            admin.consumer_connection("shared-group")  # no member online
        assert producer.send(Message(topic, b"after")).send_status == "SEND_OK"
    finally:
        first.shutdown()
        producer.shutdown()
    assert client_threads() == []
