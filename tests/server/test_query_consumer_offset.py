"""QUERY_CONSUMER_OFFSET for a group that never committed, as RocketMQ's ConsumerManageProcessor:
offset 0 while the queue starts at 0 and its first message is recent (not "in disk"), else
QUERY_NOT_FOUND so the client applies consumeFromWhere. ali-ons' default CONSUME_FROM_LAST_OFFSET
(and Java's) then starts a new group at the tail of a long backlog instead of replaying it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from broker.common.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.server.config import BrokerConfig
from broker.server.processors.clients import OffsetProcessor, total_physical_memory

if TYPE_CHECKING:
    from broker.server.controller import BrokerController

TOPIC, QUEUE = "T", 0


class FakeStore:
    """One queue whose message 0 sits at ``first_physical``; the commit log ends at ``max_physical``."""

    def __init__(self, min_offset: int, max_offset: int, first_physical: int, max_physical: int) -> None:
        self.min_offset, self.max_offset = min_offset, max_offset
        self.first_physical, self.max_physic_offset = first_physical, max_physical

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.min_offset

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offset

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        assert offset == 0 and self.max_offset > 0
        return self.first_physical


def processor(store: FakeStore, committed: int = -1, ratio: int = 40) -> OffsetProcessor:
    broker = SimpleNamespace(
        store=store,
        offsets=SimpleNamespace(query=lambda group, topic, queue_id: committed),
        config=BrokerConfig(access_message_in_memory_max_ratio=ratio),
    )
    return OffsetProcessor(cast("BrokerController", broker))  # a stand-in: the parts offsets read


async def query(proc: OffsetProcessor):
    fields = {"consumerGroup": "g", "topic": TOPIC, "queueId": QUEUE}
    return await proc.query_consumer_offset(None, create_request(RequestCode.QUERY_CONSUMER_OFFSET, fields))


async def test_committed_offset_wins():
    response = await query(processor(FakeStore(5, 9, 0, 10**15), committed=7))
    assert response.code == ResponseCode.SUCCESS and response.field("offset") == "7"


async def test_new_group_starts_at_zero_while_the_first_message_is_recent():
    response = await query(processor(FakeStore(0, 3, 1000, 5000)))
    assert response.code == ResponseCode.SUCCESS and response.field("offset") == "0"


async def test_new_group_on_an_empty_queue_starts_at_zero():
    response = await query(processor(FakeStore(0, 0, 0, 10**15)))
    assert response.code == ResponseCode.SUCCESS and response.field("offset") == "0"


async def test_new_group_is_not_found_when_the_first_message_is_in_disk():
    far_behind = total_physical_memory() * 40 // 100 + 1
    response = await query(processor(FakeStore(0, 3, 0, far_behind)))
    assert response.code == ResponseCode.QUERY_NOT_FOUND
    assert "maybe this group consumer boot first" in response.remark
    # The ratio is RocketMQ's accessMessageInMemoryMaxRatio: with 100 % the same message is recent.
    assert (await query(processor(FakeStore(0, 3, 0, far_behind), ratio=100))).field("offset") == "0"


async def test_new_group_is_not_found_once_the_queue_head_was_deleted():
    response = await query(processor(FakeStore(4, 9, 0, 5000)))
    assert response.code == ResponseCode.QUERY_NOT_FOUND


def test_the_ratio_is_read_from_broker_conf():
    config = BrokerConfig.from_properties({"accessMessageInMemoryMaxRatio": "25"})
    assert config.access_message_in_memory_max_ratio == 25
    assert config.as_properties()["accessMessageInMemoryMaxRatio"] == "25"
