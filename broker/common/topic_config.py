"""Topic configuration, permissions and the names RocketMQ reserves for its own topics."""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.java_enums import TOPIC_FILTER_TYPE
from broker.common.names import topic_problem

PERM_PRIORITY = 0x1 << 3
PERM_READ = 0x1 << 2
PERM_WRITE = 0x1 << 1
PERM_INHERIT = 0x1 << 0
PERM_DEFINED = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT
# RocketMQ's TopicSysFlag: a unit topic, a unit subscription; nothing else is defined.
TOPIC_SYS_FLAG_UNIT = 0x1 << 0
TOPIC_SYS_FLAG_UNIT_SUB = 0x1 << 1
TOPIC_SYS_FLAG_DEFINED = TOPIC_SYS_FLAG_UNIT | TOPIC_SYS_FLAG_UNIT_SUB

DEFAULT_QUEUE_NUMS = 4

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        OFFSET_MOVED_EVENT,
        SELF_TEST_TOPIC,
        BENCHMARK_TOPIC,
    }
)


REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


def validate_topic(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is (broker.common.names)."""
    return topic_problem(name)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def reply_topic(cluster: str) -> str:
    """RocketMQ's ``MixAll.getReplyTopic``: where a cluster's replies are stored. Every broker
    creates its cluster's at start, and it is a system topic (TopicValidator.addSystemTopic)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_") or topic.startswith("RMQ_SYS_")


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json_dict(self) -> dict:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }

    @classmethod
    def from_json_dict(cls, data: dict) -> TopicConfig:
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", 16)),
            write_queue_nums=int(data.get("writeQueueNums", 16)),
            perm=int(data.get("perm", PERM_READ | PERM_WRITE)),
            # As fastjson reads the enum (a name or an ordinal); unknown or absent: the default.
            topic_filter_type=TOPIC_FILTER_TYPE.read(data.get("topicFilterType"), "topicFilterType")
            or "SINGLE_TAG",
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
        )
