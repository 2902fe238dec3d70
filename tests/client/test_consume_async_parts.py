"""The asyncio consume service on its own: a coroutine listener's answers turned into commits,
send-backs, local re-consumption and broadcasting drops by ``PushConsumer``'s shared logic."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from broker.client import BROADCASTING, ConsumeConcurrentlyStatus
from broker.client.consume_async import AsyncConsumeService
from broker.client.offset_store import OffsetStore
from broker.client.push_consumer import ProcessQueue, PushConsumer
from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.message_queue import MessageQueue
from tests.listener_failures import wait_until_async

if TYPE_CHECKING:
    from broker.client.instance import MQClientInstance

MQ = MessageQueue("Orders", "broker-a", 0)
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class FakeAPI:
    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.sent_back: list[str] = []

    async def send_back(self, addr, header):
        if self.refuse:
            raise ConnectionError("broker gone")
        self.sent_back.append(header.origin_msg_id)


def make_consumer(refuse_send_back=False, **options) -> tuple[PushConsumer, FakeAPI]:
    """A running consumer whose client instance is a stand-in: consuming uses only its send-back
    API and broker addresses."""
    consumer = PushConsumer("g", "127.0.0.1:1", retry_delay_s=0.05, **options)
    api = FakeAPI(refuse_send_back)
    consumer.instance = cast(
        "MQClientInstance", SimpleNamespace(api=api, broker_addr=lambda name: "127.0.0.1:2")
    )
    consumer.offsets, consumer.running = OffsetStore(), True
    return consumer, api


def message(offset: int, topic: str = "Orders", **properties) -> MessageExt:
    msg = MessageExt(
        topic, b"body", 0, {const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"id{offset}", **properties}
    )
    msg.queue_offset, msg.commitlog_offset = offset, offset * 100
    return msg


async def consume(consumer: PushConsumer, listener, messages) -> ProcessQueue:
    """Hand ``messages`` to the service and wait until every one is settled: none left in the
    process queue, and the offset committed past the last."""
    service = AsyncConsumeService(consumer, listener, concurrency=2)
    consumer.listener, consumer.async_service = listener, service
    service.start()
    consumer.on_messages(MQ, messages)
    queue, end = consumer.process_queues[MQ], max(m.queue_offset for m in messages) + 1
    settled = await wait_until_async(lambda: len(queue) == 0 and consumer.offsets.read_memory(MQ) == end, 10)
    await service.shutdown()
    assert settled, f"{len(queue)} messages unsettled, offset {consumer.offsets.read_memory(MQ)} (want {end})"
    return queue


def test_successes_commit_past_the_last_offset_and_hooks_run():
    consumer, _ = make_consumer()
    seen: list[int] = []
    hooked: list[object] = []
    consumer.before_hooks.append(lambda msgs: hooked.append("before"))
    consumer.after_hooks.append(lambda msgs, status: hooked.append(status))

    async def listener(messages, context):
        seen.extend(m.queue_offset for m in messages)
        return SUCCESS

    queue = asyncio.run(consume(consumer, listener, [message(i) for i in range(5)]))
    assert sorted(seen) == list(range(5)) and len(queue) == 0
    assert consumer.offsets.read_memory(MQ) == 5
    assert hooked.count("before") == 5 and hooked.count(SUCCESS) == 5


def test_failures_are_sent_back_and_committed():
    consumer, api = make_consumer()

    async def listener(messages, context):
        if messages[0].queue_offset == 1:
            raise RuntimeError("boom")
        return None if messages[0].queue_offset == 2 else SUCCESS

    asyncio.run(consume(consumer, listener, [message(i) for i in range(4)]))
    assert sorted(api.sent_back) == ["id1", "id2"]
    assert consumer.offsets.read_memory(MQ) == 4


def test_a_refused_send_back_pins_the_offset_and_consumes_again_locally():
    consumer, _ = make_consumer(refuse_send_back=True)
    deliveries = []

    async def listener(messages, context):
        deliveries.append((messages[0].queue_offset, messages[0].reconsume_times))
        return SUCCESS if messages[0].reconsume_times >= 2 else ConsumeConcurrentlyStatus.RECONSUME_LATER

    queue = asyncio.run(consume(consumer, listener, [message(7)]))
    assert deliveries == [(7, 0), (7, 1), (7, 2)]
    assert len(queue) == 0 and consumer.offsets.read_memory(MQ) == 8


def test_broadcasting_drops_failures_and_batches_follow_consume_batch_size():
    consumer, api = make_consumer(message_model=BROADCASTING, consume_batch_size=3)
    sizes = []

    async def listener(messages, context):
        sizes.append(len(messages))
        context["ack_index"] = 0  # only the first of each batch consumed
        return SUCCESS

    asyncio.run(consume(consumer, listener, [message(i) for i in range(6)]))
    assert sizes == [3, 3] and api.sent_back == []
    assert consumer.offsets.read_memory(MQ) == 6


def test_a_retried_message_shows_its_original_topic():
    consumer, _ = make_consumer()
    topics = []

    async def listener(messages, context):
        topics.append(messages[0].topic)
        return SUCCESS

    retried = message(0, topic="%RETRY%g", **{const.PROPERTY_RETRY_TOPIC: "Orders"})
    asyncio.run(consume(consumer, listener, [retried]))
    assert topics == ["Orders"]


def test_no_more_listeners_run_at_once_than_the_concurrency_and_none_of_the_rest_is_lost():
    consumer, _ = make_consumer()
    running, most_at_once, finished = set(), [0], []
    release: asyncio.Event | None = None

    async def listener(messages, context):
        offset = messages[0].queue_offset
        running.add(offset)
        most_at_once[0] = max(most_at_once[0], len(running))
        assert release is not None  # made by the scenario before any message
        await release.wait()
        running.discard(offset)
        finished.append(offset)
        return SUCCESS

    async def scenario():
        nonlocal release
        release = asyncio.Event()
        service = AsyncConsumeService(consumer, listener, concurrency=2)
        consumer.listener, consumer.async_service = listener, service
        service.start()
        consumer.on_messages(MQ, [message(i) for i in range(5)])  # five batches of one
        assert await wait_until_async(lambda: len(running) == 2, 10)
        assert len(service.backlog) == 3  # the rest wait their turn
        release.set()
        assert await wait_until_async(lambda: len(finished) == 5, 10)
        await service.shutdown()  # idle workers end cleanly
        assert service.workers == []

    asyncio.run(scenario())
    assert most_at_once[0] == 2
    assert sorted(finished) == list(range(5))
    assert consumer.offsets.read_memory(MQ) == 5
