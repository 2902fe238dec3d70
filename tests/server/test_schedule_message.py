"""ScheduleMessageService on a real store: conversion, due-time delivery, progress and restart."""

import asyncio
import time

import pytest

from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.common.sysflag import TRANSACTION_PREPARED_TYPE
from broker.common.topic_config import SCHEDULE_TOPIC
from broker.server.schedule_message import ScheduleMessageService, real_message, to_schedule_message
from broker.store.message_store import MessageStore
from tests.cluster import small_store_config


class Clock:
    def __init__(self):
        self.skew = 0.0

    def __call__(self):
        return time.time() + self.skew


@pytest.fixture
def store(tmp_path):
    store = MessageStore(tmp_path / "store", small_store_config(message_delay_level="1s 10s 1h"))
    store.start()
    yield store
    store.shutdown()


def delayed(level: int, body: bytes = b"payload", topic: str = "Real", queue_id: int = 2) -> MessageExt:
    msg = MessageExt(topic, body, queue_id=queue_id, born_timestamp=int(time.time() * 1000))
    msg.tags = "TagA"
    msg.delay_time_level = level
    return msg


def test_conversion_keeps_the_real_topic_and_clamps_the_level():
    msg = delayed(7)
    assert to_schedule_message(msg, max_level=3)
    assert (msg.topic, msg.queue_id) == (SCHEDULE_TOPIC, 2)
    assert msg.properties[const.PROPERTY_REAL_TOPIC] == "Real"
    assert msg.properties[const.PROPERTY_REAL_QUEUE_ID] == "2"
    assert msg.properties[const.PROPERTY_DELAY_TIME_LEVEL] == "3"
    back = real_message(msg)
    assert back is not None
    assert (back.topic, back.queue_id, back.tags) == ("Real", 2, "TagA")
    assert const.PROPERTY_DELAY_TIME_LEVEL not in back.properties


def test_no_conversion_without_a_level_or_for_a_prepared_transaction():
    assert not to_schedule_message(delayed(0), max_level=3)
    prepared = delayed(1)
    prepared.sys_flag = TRANSACTION_PREPARED_TYPE
    assert not to_schedule_message(prepared, max_level=3)
    assert prepared.topic == "Real"


def put_delayed(store, level, body):
    msg = delayed(level, body)
    to_schedule_message(msg, 3)
    assert store.put_message(msg).ok
    store.wait_for_dispatch()


def real_topic_bodies(store):
    result = store.get_message("g", "Real", 2, 0, 100)
    return [decode_message(record).body for record in result.messages]


def test_delivers_only_when_due_and_exactly_once(store, tmp_path):
    clock = Clock()
    service = ScheduleMessageService(store, tmp_path / "config", clock=clock)
    put_delayed(store, 2, b"ten-seconds")
    # The consume-queue tag of the schedule topic is the delivery time.
    (entry,) = store.find_consume_queue(SCHEDULE_TOPIC, 1).read_entries(0, 10)
    assert entry[2] - int(time.time() * 1000) in range(8_000, 10_001)

    async def scenario():
        assert not await service.deliver_due(2)
        assert real_topic_bodies(store) == [] and service.offsets.table.get(2, 0) == 0
        clock.skew = 11
        await service.deliver_due(2)
        await service.deliver_due(2)

    asyncio.run(scenario())
    store.wait_for_dispatch()
    assert real_topic_bodies(store) == [b"ten-seconds"]
    assert service.offsets.table[2] == 1


def test_clean_stop_persists_progress_and_a_restart_resumes_without_repeats(store, tmp_path):
    clock = Clock()
    clock.skew = 2
    put_delayed(store, 1, b"first")
    put_delayed(store, 3, b"an-hour")

    async def run_until_delivered(expected):
        service = ScheduleMessageService(store, tmp_path / "config", clock=clock)
        service.start()
        for _ in range(100):
            store.wait_for_dispatch()
            if len(real_topic_bodies(store)) >= expected:
                break
            await asyncio.sleep(0.05)
        await service.stop()
        return service

    first = asyncio.run(run_until_delivered(1))
    assert first.offsets.table.get(1) == 1 and first.offsets.table.get(3, 0) == 0
    put_delayed(store, 1, b"second")
    second = asyncio.run(run_until_delivered(2))  # a new service reads delayOffset.json
    assert real_topic_bodies(store) == [b"first", b"second"]
    assert second.offsets.table[1] == 2 and second.offsets.table.get(3, 0) == 0
