"""Topics and groups made before names were checked (an old heartbeat's ``a/b``) are left out
when the broker loads its tables: no request could name them, and a registration carrying one
would be refused by the name servers."""

from broker.common.topic_config import TopicConfig
from broker.server.subscription_manager import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.server.topic_manager import TopicConfigManager


def test_illegal_topics_in_topics_json_are_ignored(tmp_path, caplog):
    old = TopicConfigManager(tmp_path, "DefaultCluster", "broker-a", True, 4)
    old.load()
    for name in ("Kept", "a/b", "../../x", "%RETRY%" + "g" * 127):
        old.table[name] = TopicConfig(name, 1, 1)  # as an older broker could have written them
    old.persist()
    loaded = TopicConfigManager(tmp_path, "DefaultCluster", "broker-a", True, 4)
    loaded.load()
    assert "Kept" in loaded.table
    assert not {"a/b", "../../x", "%RETRY%" + "g" * 127} & set(loaded.table)
    assert "ignoring 'a/b'" in caplog.text


def test_illegal_groups_in_subscription_group_json_are_ignored(tmp_path, caplog):
    old = SubscriptionGroupManager(tmp_path, True)
    old.load()
    old.update(SubscriptionGroupConfig("kept-group"))
    old.update(SubscriptionGroupConfig("a/b"))
    loaded = SubscriptionGroupManager(tmp_path, True)
    loaded.load()
    assert set(loaded.table) == {"kept-group"}
    assert "ignoring 'a/b'" in caplog.text
