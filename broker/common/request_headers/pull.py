"""Headers of pulling and of the consumer-offset requests."""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, absent, header


@header
class PullMessageRequestHeader(CommandHeader):
    """PULL_MESSAGE (11); ``sys_flag`` bits are in :mod:`broker.common.sysflag` / PullSysFlag."""

    consumer_group: str = absent("")
    topic: str = absent("")
    queue_id: int
    queue_offset: int
    max_msg_nums: int = absent(32)
    sys_flag: int = absent(0)
    commit_offset: int = absent(-1)  # none to commit
    suspend_timeout_millis: int = absent(15_000)
    sub_version: int = absent(0)
    subscription: str | None = None
    expression_type: str | None = None


@header
class PullMessageResponseHeader(CommandHeader):
    # In the order the broker has always written them (RocketMQ declares the broker id first).
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int


@header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: int


@header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int | None = None


@header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@header
class SearchOffsetRequestHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: int


@header
class SearchOffsetResponseHeader(CommandHeader):
    offset: int


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int


@header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int


@header
class GetMinOffsetRequestHeader(CommandHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int


@header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: int


@header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int


@header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int


@header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and, broker → client, RESET_CONSUMER_CLIENT_OFFSET
    (220). ``timestamp`` -1 means the latest offset."""

    topic: str = absent("")
    group: str = absent("")
    timestamp: int
    is_force: bool = absent(True, default=False)
