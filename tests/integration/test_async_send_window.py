"""Async sends against a real broker are held to the producer's window (send_window.py): no more
than ``max_async_in_flight`` await answers, the rest wait for room and are sent as answers come
back, or fail unsent at their timeout. The broker is paused with SIGSTOP to play a broker that
answers nothing for a while; it takes in the bytes (the kernel does) and serves them on SIGCONT."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from broker.client import AsyncProducer, Producer
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from broker.remoting.command import create_request
from broker.remoting.errors import RemotingTooMuchRequestError
from tests.cluster import ONE_BROKER, start


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = start(ONE_BROKER, tmp_path_factory.mktemp("send-window"))
    yield cluster
    cluster.broker.proc.send_signal(signal.SIGCONT)  # whatever a failed test left paused
    cluster.stop()


class Paused:
    """The broker stopped (SIGSTOP) for the block; continued on the way out."""

    def __init__(self, cluster) -> None:
        self.proc = cluster.broker.proc

    def __enter__(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def __exit__(self, *exc_info) -> None:
        self.proc.send_signal(signal.SIGCONT)


def stored(cluster, topic: str) -> int:
    """Messages the broker holds in the topic's single queue."""
    fields = {"topic": topic, "queueId": 0}
    return int(
        cluster.admin.invoke(cluster.broker_addr, create_request(RequestCode.GET_MAX_OFFSET, fields)).field(
            "offset"
        )
    )


def test_asyncio_sends_beyond_the_window_wait_and_all_arrive(cluster):
    topic = "WindowAsyncio"
    cluster.create_topic(topic, 1)

    async def scenario() -> tuple[int, int]:
        options = {"instance_name": "wa", "max_async_in_flight": 4}
        async with AsyncProducer("window-asyncio", cluster.namesrv_addr, **options) as producer:
            await producer.send(Message(topic, b"route and connection"))
            window = producer.producer.async_window
            futures, most_in_flight, most_queued = [], 0, 0
            for i in range(100):
                futures.append(producer.send_async(Message(topic, f"m{i}".encode())))
                most_in_flight = max(most_in_flight, window.messages)
                most_queued = max(most_queued, window.queued)
            results = await asyncio.gather(*futures)
            assert all(r.send_status == "SEND_OK" for r in results)
            assert [r.queue_offset for r in results] == list(range(1, 101))  # sent in call order
            assert window.messages == 0 and window.queued == 0
            return most_in_flight, most_queued

    most_in_flight, most_queued = asyncio.run(scenario())
    assert most_in_flight == 4
    assert most_queued == 96  # called without yielding: all but four waited for room
    assert stored(cluster, topic) == 101


def test_asyncio_send_without_room_fails_unsent_at_its_timeout(cluster):
    topic = "WindowTimeout"
    cluster.create_topic(topic, 1)

    async def scenario() -> None:
        options = {"instance_name": "wt", "max_async_in_flight": 2}
        async with AsyncProducer("window-timeout", cluster.namesrv_addr, **options) as producer:
            await producer.send(Message(topic, b"route and connection"))
            with Paused(cluster):
                in_flight = [producer.send_async(Message(topic, f"in-{i}".encode())) for i in range(2)]
                producer.producer.send_timeout_ms = 300  # the third's wait is shorter than their 3 s
                third = producer.send_async(Message(topic, b"never sent"))
                with pytest.raises(RemotingTooMuchRequestError, match="within 300 ms: 2 sends"):
                    await third
                assert not any(f.done() for f in in_flight)  # still awaiting the paused broker
            results = await asyncio.gather(*in_flight)  # answered once the broker runs again
            assert [r.queue_offset for r in results] == [1, 2]

    asyncio.run(scenario())
    assert stored(cluster, topic) == 3  # the first send and the two in flight: the third never left


def test_blocking_send_async_waits_in_the_calling_thread_for_room(cluster):
    topic = "WindowBlocking"
    cluster.create_topic(topic, 1)
    producer = Producer("window-blocking", cluster.namesrv_addr, instance_name="wb", max_async_in_flight=4)
    producer.start()
    try:
        producer.send(Message(topic, b"route and connection"))
        with Paused(cluster):
            futures = [producer.send_async(Message(topic, f"in-{i}".encode())) for i in range(4)]
            fifth: list = []
            caller = threading.Thread(
                target=lambda: fifth.append(producer.send_async(Message(topic, b"fifth")))
            )
            caller.start()
            caller.join(0.5)
            assert caller.is_alive() and not fifth  # no room while the broker answers nothing
            assert producer.async_window.messages == 4
        caller.join(10)
        assert fifth, "the fifth send never found room"
        results = [f.result(10) for f in [*futures, fifth[0]]]
        assert [r.queue_offset for r in results] == [1, 2, 3, 4, 5]
        assert wait_until(lambda: producer.async_window.messages == 0, timeout=10)
    finally:
        producer.shutdown()
    assert stored(cluster, topic) == 6
