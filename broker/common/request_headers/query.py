"""Headers of the message queries (by key, by commit-log offset)."""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, absent, header, wire


@header
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12): by key (or unique msgId) within a store-time range."""

    topic: str = absent("")
    key: str = absent("")
    max_num: int = absent(32)
    begin_timestamp: int = absent(0)
    end_timestamp: int = absent(2**62)
    # RocketMQ's tools add this field to look a client msgId up in the unique-key index.
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", default=None)


@header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@header
class ViewMessageRequestHeader(CommandHeader):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commit-log offset from an offsetMsgId."""

    offset: int
