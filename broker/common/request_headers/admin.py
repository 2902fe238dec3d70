"""Headers of the administration requests (topics, subscription groups, statistics, connections)."""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, absent, header
from broker.common.topic_config import PERM_READ, PERM_WRITE


@header
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str = absent("")
    default_topic: str = absent("")
    read_queue_nums: int = absent(16)
    write_queue_nums: int = absent(16)
    perm: int = absent(PERM_READ | PERM_WRITE)
    topic_filter_type: str = absent("SINGLE_TAG")
    order: bool = False
    topic_sys_flag: int | None = None


@header
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str = absent("")


@header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str = absent("")
    remove_offset: bool = False


@header
class GetConsumeStatsRequestHeader(CommandHeader):
    """GET_CONSUME_STATS (208); without a topic, every topic the group consumes."""

    consumer_group: str = absent("")
    topic: str | None = None


@header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str = absent("")


@header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = absent("")


@header
class GetProducerConnectionListRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = absent("")


@header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str = absent("")


@header
class PurgeDamagedCommitLogRequestHeader(CommandHeader):
    """PURGE_DAMAGED_COMMIT_LOG (3101, this project's own): the quarantined range starting at
    ``from_offset``, or every open one when it is left out."""

    from_offset: int | None = None


@header
class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26): ``version`` is the DataVersion JSON; ``pending_restart`` (a JSON
    object of the values accepted that wait for a restart) is this broker's own addition, which
    RocketMQ's tools ignore."""

    version: str
    pending_restart: str | None = None
