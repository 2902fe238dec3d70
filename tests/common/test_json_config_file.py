import orjson

from broker.common.json_config_file import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    JsonConfigFile,
    topics_file,
)


def test_persist_keeps_a_backup_and_loads_it_when_main_is_damaged(tmp_path):
    config = JsonConfigFile(tmp_path / "topics.json")
    config.persist({"v": 1})
    config.persist({"v": 2})
    assert orjson.loads((tmp_path / "topics.json.bak").read_bytes()) == {"v": 1}
    (tmp_path / "topics.json").write_text('{"v": 3')  # torn write
    assert config.load() == {"v": 1}
    (tmp_path / "topics.json.bak").write_text("")
    assert config.load() is None
    assert not (tmp_path / "topics.json.tmp").exists()


def test_consumer_offsets_shape_and_reload(tmp_path):
    table = ConsumerOffsetTable(tmp_path)
    table.commit("g1", "orders", 0, 42)
    table.commit("g1", "orders", 3, 7)
    table.commit("g2", "pay", 1, 5)
    table.persist()
    raw = orjson.loads((tmp_path / "consumerOffset.json").read_bytes())
    assert raw == {"offsetTable": {"orders@g1": {"0": 42, "3": 7}, "pay@g2": {"1": 5}}}
    again = ConsumerOffsetTable(tmp_path)
    again.load()
    assert again.query("g1", "orders", 3) == 7 and again.query("g1", "orders", 1) == -1
    assert again.groups_of_topic("orders") == {"g1"} and again.topics_of_group("g2") == {"pay"}
    again.remove_group("g1")
    assert again.query_all("g1", "orders") == {}


def test_topics_file_and_delay_offsets(tmp_path):
    topics = topics_file(tmp_path)
    topics.data_version.next_version()
    topics.persist({"T": {"topicName": "T", "readQueueNums": 4}})
    raw = orjson.loads((tmp_path / "topics.json").read_bytes())
    assert raw["topicConfigTable"]["T"]["readQueueNums"] == 4 and raw["dataVersion"]["counter"] == 1
    assert topics_file(tmp_path).load() == {"T": {"topicName": "T", "readQueueNums": 4}}
    delay = DelayOffsetTable(tmp_path)
    delay.table = {1: 10, 3: 0}
    delay.persist()
    loaded = DelayOffsetTable(tmp_path)
    loaded.load()
    assert loaded.table == {1: 10, 3: 0}
