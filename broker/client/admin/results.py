"""What the admin client returns: typed results of RocketMQ's admin requests (none of them prints)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.message import MessageExt


@dataclass(frozen=True)
class BrokerSummary:
    """One row of ``clusterList``: a broker address and its runtime figures."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    version: str
    in_tps: float
    out_tps: float
    page_cache_lock_ms: int
    hours_of_data: float
    disk_ratio: float
    runtime_error: str | None = None
    # Messages in (put) and out (got) yesterday and today so far, from the totals the broker
    # notes at midnight (what ``clusterList -m`` prints).
    in_total_yesterday: int = 0
    out_total_yesterday: int = 0
    in_total_today: int = 0
    out_total_today: int = 0
    # How long a request arriving now waits before the broker serves it: its event loop's lag
    # (RocketMQ's sendThreadPoolQueueHeadWaitTimeMills).
    request_wait_ms: int = 0


@dataclass(frozen=True)
class QueueOffsetStatus:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    queues: list[QueueOffsetStatus]


@dataclass(frozen=True)
class QueueConsumeProgress:
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    diff: int
    last_timestamp: int


@dataclass(frozen=True)
class ConsumeProgress:
    group: str
    queues: list[QueueConsumeProgress]
    consume_tps: float
    diff_total: int


@dataclass(frozen=True)
class ClientConnection:
    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class Subscription:
    topic: str
    sub_string: str
    expression_type: str


@dataclass(frozen=True)
class ConsumerConnection:
    group: str
    connections: list[ClientConnection]
    subscriptions: list[Subscription]
    consume_type: str
    message_model: str
    consume_from_where: str


@dataclass(frozen=True)
class ProducerConnection:
    group: str
    connections: list[ClientConnection]


@dataclass(frozen=True)
class ConsumerGroupSummary:
    """One row of ``consumerProgress`` without ``-g``: a group, its clients and its lag."""

    group: str
    count: int
    version: int | None
    consume_type: str
    message_model: str
    consume_tps: float
    diff_total: int


@dataclass(frozen=True)
class ResetOffsetEntry:
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True)
class PullResult:
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


@dataclass
class BrokerConfigState:
    """A broker's configuration as GET_BROKER_CONFIG answers it."""

    values: dict[str, str]  # what the broker runs with
    pending: dict[str, str]  # accepted, used after the broker's restart


@dataclass(frozen=True)
class DamagedCommitLogRange:
    """A quarantined range of a broker's commit log (runtime info's ``commitLogDamagedDetail``
    lists the open ones; ``purge_damaged_commit_log`` returns those it purged)."""

    from_offset: int  # absolute commit-log offset where the damaged record began
    to_offset: int  # exclusive: where the next sound record (or the next segment) begins
    segment: str  # the segment file's name
    reason: str
    found_at: int  # ms
    purged_at: int = 0  # ms; 0 while open

    @classmethod
    def from_json(cls, data: dict) -> DamagedCommitLogRange:
        return cls(
            int(data["from"]), int(data["to"]), str(data.get("segment", "")), str(data.get("reason", "")),
            int(data.get("foundAt", 0)), int(data.get("purgedAt", 0)),
        )  # fmt: skip
