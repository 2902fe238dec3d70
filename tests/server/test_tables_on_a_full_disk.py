"""Issue 31, §5: a topic or group an operator creates is written before it is acknowledged; when the
disk cannot take the file, the change is undone in memory too (the broker answers
SERVICE_NOT_AVAILABLE, see tests/integration/test_full_disk_metadata.py). This is the case the disk
guard has not flagged yet: the file write itself fails with ENOSPC.

Before: ``update`` kept the topic in memory (served and registered until the next restart) while
topics.json never held it.
"""

from __future__ import annotations

import errno

import pytest

from broker.common.topic_config import TopicConfig
from broker.server.subscription_manager import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.server.topic_manager import TopicConfigManager
from tests.small_disk import fill, small_disk


@pytest.fixture
def disk(tmp_path):
    with small_disk(tmp_path / "disk", 1024 * 1024) as mounted:
        yield mounted


def test_a_topic_the_disk_cannot_take_is_not_kept_in_memory(disk):
    topics = TopicConfigManager(disk / "config", "C", "b", True, 4)
    topics.load()
    assert topics.update_durably(TopicConfig("Kept", 4, 4))
    version = topics.data_version.to_json()
    old = topics.get("Kept")
    filler = fill(disk)
    # Many queues: a bigger file than the one already there, so it cannot fit where it was.
    new_topics = [TopicConfig(f"Lost{n}", 8, 8) for n in range(200)]
    assert not any(topics.update_durably(config) for config in new_topics)
    assert not topics.update_durably(TopicConfig("Kept", 16, 16))
    assert topics.file.file.last_error is not None and topics.file.file.last_error.errno == errno.ENOSPC
    assert topics.get("Lost0") is None and topics.get("Kept") is old  # the memory is unchanged
    assert topics.data_version.to_json() == version  # the name servers see no change either
    filler.unlink()
    assert topics.update_durably(new_topics[0])
    again = TopicConfigManager(disk / "config", "C", "b", True, 4)
    again.load()
    kept = again.get("Kept")
    assert again.get("Lost0") is not None and kept is not None and kept.read_queue_nums == 4


def test_a_group_the_disk_cannot_take_is_not_kept_in_memory(disk):
    groups = SubscriptionGroupManager(disk / "config", True)
    groups.load()
    assert groups.update_durably(SubscriptionGroupConfig("kept"))
    filler = fill(disk)
    assert not any(groups.update_durably(SubscriptionGroupConfig(f"lost{n}")) for n in range(200))
    assert set(groups.table) == {"kept"}
    filler.unlink()
    assert groups.update_durably(SubscriptionGroupConfig("lost0"))
    again = SubscriptionGroupManager(disk / "config", True)
    again.load()
    assert set(again.table) == {"kept", "lost0"}
