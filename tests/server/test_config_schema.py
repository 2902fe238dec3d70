"""The broker's key table (broker/server/config_schema.py): one home for every broker.conf key's
type, range, default and how a change applies — and the updater that uses it on a running broker."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from broker.common.conf_file import ConfError, parse_properties
from broker.local_cluster import SMALL_STORE_CONF
from broker.server import config_schema as schema
from broker.server.config import BrokerConfig
from broker.server.config_update import ConfigUpdateOutcome
from broker.server.controller import BrokerController
from broker.store.store_config import MessageStoreConfig


def test_every_key_names_an_attribute_whose_default_it_accepts():
    defaults: dict[str, BrokerConfig | MessageStoreConfig] = {
        schema.BROKER: BrokerConfig(),
        schema.STORE: MessageStoreConfig(),
    }
    for name, key in schema.KEYS.items():
        holder = defaults[key.owner]
        assert key.attr in {f.name for f in dataclasses.fields(holder)}, name
        default = getattr(holder, key.attr)
        assert key.parse(key.format(default)) == default, name


def test_every_setting_of_the_store_is_a_key_except_what_the_broker_derives():
    keyed = {key.attr for key in schema.KEYS.values() if key.owner == schema.STORE}
    derived = {"store_path_root_dir", "store_host"}  # storePathRootDir (the broker's), the address
    assert {f.name for f in dataclasses.fields(MessageStoreConfig)} - keyed == derived


def test_broker_conf_round_trip_and_store_values_reach_the_store_config():
    config = BrokerConfig.from_properties(
        {"diskMaxUsedSpaceRatio": "80", "deleteWhen": "03;15", "namesrvAddr": "a:1;b:2", "listenPort": "0"}
    )
    assert config.store_config().disk_max_used_space_ratio == 80
    assert config.store_config().delete_when == "03;15" and config.namesrv_addrs == ["a:1", "b:2"]
    again = BrokerConfig.from_properties(config.as_properties())
    assert again.as_properties() == config.as_properties()
    assert set(config.as_properties()) == set(schema.KEYS)


def test_broker_ip1_is_an_address_not_a_host_name():
    """The store writes brokerIP1 into every message as 4 or 16 bytes: a host name was accepted
    here and crashed the first put."""
    assert BrokerConfig.from_properties({"brokerIP1": "::1"}).broker_ip1 == "::1"
    with pytest.raises(schema.ConfigValueError, match="IPv4 or IPv6 address"):
        BrokerConfig.from_properties({"brokerIP1": "broker-a.local"})


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("diskMaxUsedSpaceRatio", "abc", "not a whole number"),
        ("diskMaxUsedSpaceRatio", "96", "between 10 and 95"),
        ("fileReservedTime", "-1", "between 0 and"),
        ("maxMessageSize", "0", "between 1 and"),
        ("deleteWhen", "25", "hours 0-23"),
        ("deleteWhen", "", "hours 0-23"),
        ("messageDelayLevel", "1s 2x", "'2x' is not a delay"),
        ("brokerPermission", "5", "one of 2, 4, 6"),
        ("autoCreateTopicEnable", "yes", "true or false"),
        ("flushDiskType", "SOMETIMES", "ASYNC_FLUSH, SYNC_FLUSH"),
        ("namesrvAddr", "nohostport", "has no port (host:port)"),
        ("archiveUri", "s3a://bucket/segments", "only a local directory or file://"),
    ],
)
def test_bad_values_are_refused_naming_key_and_value(key, value, reason):
    with pytest.raises(schema.ConfigValueError) as refused:
        BrokerConfig.from_properties({key: value})
    assert f"{key}={value!r}" in str(refused.value) and reason in str(refused.value)
    with pytest.raises(schema.ConfigValueError):
        schema.validate_update({key: value})


def test_unknown_keys_warn_at_start_and_are_refused_at_run_time(caplog):
    with caplog.at_level(logging.WARNING):
        BrokerConfig.from_properties({"noSuchKey": "1"})
    assert "noSuchKey" in caplog.text
    with pytest.raises(schema.UnknownConfigKeyError, match="unknown broker config key: noSuchKey"):
        schema.validate_update({"noSuchKey": "1", "maxMessageSize": "1024"})
    with pytest.raises(schema.FixedConfigKeyError, match="cannot change storePathRootDir at run time"):
        schema.validate_update({"storePathRootDir": "/tmp/elsewhere"})


def test_the_five_keys_of_the_issue_are_live_or_say_they_need_a_restart():
    five = ("maxMessageSize", "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "messageDelayLevel")
    applies = {name: schema.KEYS[name].apply for name in five}
    assert applies == {
        "maxMessageSize": schema.Apply.LIVE,
        "fileReservedTime": schema.Apply.LIVE,
        "deleteWhen": schema.Apply.LIVE,
        "diskMaxUsedSpaceRatio": schema.Apply.LIVE,
        # Parsed into the delay service's levels at start, as RocketMQ does.
        "messageDelayLevel": schema.Apply.RESTART,
    }


def _controller(tmp_path, conf_text: str | None) -> BrokerController:
    raw = {
        "storePathRootDir": str(tmp_path / "store"),
        "listenPort": "0",
        **parse_properties(SMALL_STORE_CONF),
    }
    conf_path = None
    if conf_text is not None:
        conf_path = tmp_path / "broker.conf"
        conf_path.write_text(conf_text)
    return BrokerController(BrokerConfig.from_properties(raw, conf_path))


def test_updater_applies_live_keys_to_the_running_objects_and_keeps_restart_keys_pending(tmp_path):
    broker = _controller(tmp_path, "# mine\nbrokerName=x\n")
    updater = broker.config_updater
    outcome = updater.update({"maxMessageSize": "2048", "messageDelayLevel": "1s 2s"})
    assert broker.store.config.max_message_size == 2048  # the store's own settings object
    assert broker.store.config.message_delay_level != "1s 2s"
    assert outcome.applied == {"maxMessageSize": "2048"} and updater.pending == {"messageDelayLevel": "1s 2s"}
    assert "needs restart: messageDelayLevel=1s 2s" in outcome.remark()
    assert broker.config.conf_path is not None
    text = broker.config.conf_path.read_text()
    assert text.startswith("# mine\nbrokerName=x\n") and "maxMessageSize=2048" in text
    # Setting the running value again: nothing is pending any more.
    updater.update({"messageDelayLevel": broker.store.config.message_delay_level})
    assert updater.pending == {}


def test_updater_refuses_before_writing_anything(tmp_path):
    broker = _controller(tmp_path, "brokerName=x\n")
    with pytest.raises(ConfError):
        broker.config_updater.update({"maxMessageSize": "1024", "diskMaxUsedSpaceRatio": "abc"})
    assert broker.config.conf_path is not None
    assert broker.config.conf_path.read_text() == "brokerName=x\n"
    assert broker.store.config.max_message_size == MessageStoreConfig().max_message_size


def test_without_a_broker_conf_restart_keys_are_refused_and_live_ones_say_they_are_not_kept(tmp_path):
    broker = _controller(tmp_path, None)
    with pytest.raises(ConfError, match=r"started without a broker\.conf"):
        broker.config_updater.update({"messageDelayLevel": "1s"})
    outcome = broker.config_updater.update({"defaultTopicQueueNums": "6"})
    assert "not kept" in outcome.remark() and broker.topics.default_queue_nums == 6


def test_outcome_remark_for_an_all_live_update():
    assert ConfigUpdateOutcome({"fileReservedTime": "0"}).remark() == "applied now: fileReservedTime=0"
