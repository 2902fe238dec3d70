"""Broker settings from ``broker.conf`` (RocketMQ's key names) and command-line overrides."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from broker.common.conf_file import ConfError, get_bool, get_int, get_list, load_conf
from broker.store.store_config import MessageStoreConfig

# Settings an operator may change at run time with UPDATE_BROKER_CONFIG (others need a restart).
MUTABLE_KEYS = frozenset(
    {
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "brokerPermission",
        "longPollingEnable",
        "shortPollingTimeMills",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "maxMessageSize",
        "enablePropertyFilter",
        "messageDelayLevel",
        "registerBrokerIntervalMillis",
        "transactionTimeOut",
        "transactionCheckInterval",
        "transactionCheckMax",
    }
)


@dataclass
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    namesrv_addrs: list[str] = field(default_factory=list)
    store_path_root_dir: str = "store"
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 4
    broker_permission: int = 6
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    register_broker_interval_millis: int = 30_000
    client_channel_max_idle_millis: int = 120_000
    flush_consumer_offset_interval: int = 5000
    enable_property_filter: bool = False
    # A new group starts at offset 0 only while the queue's first message is within this share (%)
    # of physical memory behind the commit log's end (RocketMQ's MessageStoreConfig key).
    access_message_in_memory_max_ratio: int = 40
    # Delay, retry and transaction services (RocketMQ's defaults; tests shorten them).
    flush_delay_offset_interval: int = 10_000
    transaction_timeout: int = 6000
    transaction_check_interval: int = 60_000
    transaction_check_max: int = 15
    # How long an orderly consumer's queue lock lives without renewal (RocketMQ: 60 s).
    rebalance_lock_max_live_time: int = 60_000
    store_reply_message_enable: bool = True
    # Create the trace topic at start-up (RocketMQ's traceTopicEnable); the broker then also
    # traces the retries and dead-lettering it performs.
    trace_topic_enable: bool = False
    # Keep polling for this long after a read instead of sleeping (broker/remoting/busy_poll.py):
    # waking a sleeping broker costs more than serving a message. 0 turns it off.
    busy_poll_window_micros: int = 250
    raw: dict[str, str] = field(default_factory=dict)
    conf_path: Path | None = None

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @classmethod
    def load(cls, conf_path: str | None, overrides: dict | None = None) -> BrokerConfig:
        raw = load_conf(conf_path, overrides)
        return cls.from_properties(raw, Path(conf_path) if conf_path else None)

    @classmethod
    def from_properties(cls, raw: dict[str, str], conf_path: Path | None = None) -> BrokerConfig:
        return cls(
            broker_cluster_name=raw.get("brokerClusterName", "DefaultCluster"),
            broker_name=raw.get("brokerName", socket.gethostname()),
            broker_id=get_int(raw, "brokerId", 0),
            broker_ip1=raw.get("brokerIP1", "127.0.0.1"),
            listen_port=get_int(raw, "listenPort", 10911),
            namesrv_addrs=get_list(raw, "namesrvAddr"),
            store_path_root_dir=raw.get("storePathRootDir", str(Path.home() / "store")),
            auto_create_topic_enable=get_bool(raw, "autoCreateTopicEnable", True),
            auto_create_subscription_group=get_bool(raw, "autoCreateSubscriptionGroup", True),
            default_topic_queue_nums=get_int(raw, "defaultTopicQueueNums", 4),
            broker_permission=get_int(raw, "brokerPermission", 6),
            long_polling_enable=get_bool(raw, "longPollingEnable", True),
            short_polling_time_mills=get_int(raw, "shortPollingTimeMills", 1000),
            register_broker_interval_millis=get_int(raw, "registerBrokerIntervalMillis", 30_000),
            client_channel_max_idle_millis=get_int(raw, "clientChannelMaxIdleTimeMillis", 120_000),
            flush_consumer_offset_interval=get_int(raw, "flushConsumerOffsetInterval", 5000),
            enable_property_filter=get_bool(raw, "enablePropertyFilter", False),
            access_message_in_memory_max_ratio=get_int(raw, "accessMessageInMemoryMaxRatio", 40),
            flush_delay_offset_interval=get_int(raw, "flushDelayOffsetInterval", 10_000),
            transaction_timeout=get_int(raw, "transactionTimeOut", 6000),
            transaction_check_interval=get_int(raw, "transactionCheckInterval", 60_000),
            transaction_check_max=get_int(raw, "transactionCheckMax", 15),
            rebalance_lock_max_live_time=get_int(raw, "rebalanceLockMaxLiveTime", 60_000),
            store_reply_message_enable=get_bool(raw, "storeReplyMessageEnable", True),
            trace_topic_enable=get_bool(raw, "traceTopicEnable", False),
            busy_poll_window_micros=_non_negative(raw, "busyPollWindowMicros", 250),
            raw=dict(raw),
            conf_path=conf_path,
        )

    def store_config(self) -> MessageStoreConfig:
        return MessageStoreConfig.from_properties(
            self.raw, store_path_root_dir=self.store_path_root_dir, store_host=self.broker_addr
        )

    def as_properties(self) -> dict[str, str]:
        """Every effective setting under its RocketMQ name (GET_BROKER_CONFIG)."""
        values = {
            "brokerClusterName": self.broker_cluster_name,
            "brokerName": self.broker_name,
            "brokerId": str(self.broker_id),
            "brokerIP1": self.broker_ip1,
            "listenPort": str(self.listen_port),
            "namesrvAddr": ";".join(self.namesrv_addrs),
            "storePathRootDir": self.store_path_root_dir,
            "autoCreateTopicEnable": str(self.auto_create_topic_enable).lower(),
            "autoCreateSubscriptionGroup": str(self.auto_create_subscription_group).lower(),
            "defaultTopicQueueNums": str(self.default_topic_queue_nums),
            "brokerPermission": str(self.broker_permission),
            "longPollingEnable": str(self.long_polling_enable).lower(),
            "shortPollingTimeMills": str(self.short_polling_time_mills),
            "registerBrokerIntervalMillis": str(self.register_broker_interval_millis),
            "enablePropertyFilter": str(self.enable_property_filter).lower(),
            "accessMessageInMemoryMaxRatio": str(self.access_message_in_memory_max_ratio),
            "flushDelayOffsetInterval": str(self.flush_delay_offset_interval),
            "transactionTimeOut": str(self.transaction_timeout),
            "transactionCheckInterval": str(self.transaction_check_interval),
            "transactionCheckMax": str(self.transaction_check_max),
            "rebalanceLockMaxLiveTime": str(self.rebalance_lock_max_live_time),
            "busyPollWindowMicros": str(self.busy_poll_window_micros),
            "storeReplyMessageEnable": str(self.store_reply_message_enable).lower(),
            "traceTopicEnable": str(self.trace_topic_enable).lower(),
        }
        store = self.store_config()
        values.update(
            {
                "flushDiskType": store.flush_disk_type,
                "mappedFileSizeCommitLog": str(store.mapped_file_size_commit_log),
                "maxMessageSize": str(store.max_message_size),
                "fileReservedTime": str(store.file_reserved_time),
                "deleteWhen": store.delete_when,
                "diskMaxUsedSpaceRatio": str(store.disk_max_used_space_ratio),
                "messageDelayLevel": store.message_delay_level,
            }
        )
        for key, value in self.raw.items():
            values.setdefault(key, value)
        return values


def _non_negative(raw: dict[str, str], key: str, default: int) -> int:
    value = get_int(raw, key, default)
    if value < 0:
        raise ConfError(f"{key}={value} cannot be negative")
    return value
