"""A slave's copy of its master's metadata (broker/server/slave_sync.py), applied to the real
topic, group, offset and delay tables of a broker directory: what replaces, what merges, and
answers that are refused whole."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.common.json_config_file import ConsumerOffsetTable, DelayOffsetTable
from broker.server.config import BrokerConfig
from broker.server.slave_sync import MetadataSyncError, SlaveSynchronize
from broker.server.subscription_manager import SubscriptionGroupManager
from broker.server.topic_manager import TopicConfigManager


@pytest.fixture
def slave(tmp_path):
    config = BrokerConfig(broker_name="b", broker_id=1)
    topics = TopicConfigManager(tmp_path, "c", "b", True, 4)
    topics.load()
    groups = SubscriptionGroupManager(tmp_path, True)
    offsets = ConsumerOffsetTable(tmp_path)
    schedule = SimpleNamespace(offsets=DelayOffsetTable(tmp_path))
    broker = SimpleNamespace(config=config, topics=topics, groups=groups, offsets=offsets, schedule=schedule)
    return SlaveSynchronize(broker), broker  # type: ignore[arg-type]


def _topic(name: str, queues: int = 4) -> dict:
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}


def test_topics_and_groups_are_replaced_when_the_masters_version_differs(slave, tmp_path):
    sync, broker = slave
    broker.topics.update(broker.topics.get("TBW102"))  # something of the slave's own
    version = {"timestamp": 5, "counter": 9}
    wrapper = {
        "topicConfigTable": {"orders": _topic("orders", 8), "a/b": _topic("a/b")},
        "dataVersion": version,
    }
    persist = sync._apply_topics(wrapper)
    assert persist is not None
    persist()
    assert set(broker.topics.table) == {"orders"}  # wholesale, as RocketMQ's; an illegal name left out
    assert broker.topics.get("orders").read_queue_nums == 8
    assert sync._apply_topics(wrapper) is None  # same version: nothing to do
    reloaded = TopicConfigManager(tmp_path, "c", "b", True, 4)
    reloaded.load()
    assert "orders" in reloaded.table and reloaded.data_version.to_json() == version

    groups = {"subscriptionGroupTable": {"g1": {"groupName": "g1"}}, "dataVersion": version}
    sync._apply_groups(groups)()
    assert set(broker.groups.table) == {"g1"}


def test_offsets_merge_with_the_masters_winning_and_delay_progress_is_replaced(slave):
    sync, broker = slave
    broker.offsets.commit("g", "t", 0, 5)  # told to the slave while its master was away
    broker.offsets.commit("g", "t", 1, 7)
    persist = sync._apply_offsets({"offsetTable": {"t@g": {"1": 40, "2": 3}, "bad/topic@g": {"0": 1}}})
    assert persist is not None
    assert broker.offsets.query_all("g", "t") == {0: 5, 1: 40, 2: 3}
    assert "bad/topic@g" not in broker.offsets.table
    assert sync._apply_offsets({"offsetTable": {"t@g": {"1": 40}}}) is None  # nothing new
    sync._apply_delay_offsets({"offsetTable": {"1": 12, "3": 4}})()
    assert broker.schedule.offsets.table == {1: 12, 3: 4}


def test_an_answer_with_a_bad_number_is_refused_whole(slave):
    sync, broker = slave
    with pytest.raises(MetadataSyncError, match="no Java long"):
        sync._apply_offsets({"offsetTable": {"t@g": {"0": 1, "1": 2**70}}})
    assert broker.offsets.table == {}
    with pytest.raises(ValueError):
        sync._apply_delay_offsets({"offsetTable": {"x": 1}})
    assert broker.schedule.offsets.table == {}


def test_a_topic_entry_without_its_fields_is_refused(slave):
    sync, broker = slave
    before = dict(broker.topics.table)
    with pytest.raises((LookupError, ValueError, TypeError)):
        sync._apply_topics(
            {"topicConfigTable": {"t": {"perm": "x"}}, "dataVersion": {"timestamp": 1, "counter": 1}}
        )
    assert broker.topics.table == before


async def test_without_a_known_master_a_round_says_so(slave):
    sync, broker = slave
    broker.replication = SimpleNamespace(master_addr="")
    assert not await sync.sync_all()
    assert sync.runtime_info()["slaveSyncError"] == "no master known yet"
    await sync.stop()
