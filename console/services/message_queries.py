"""W5: finding messages (by topic and store-time range, by key, by id) and what each consumer group
did with one; every result is a ``describe_message`` view, the same dict mqadmin prints."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from broker.client.admin import AsyncMQAdmin, MQAdmin, MQClientError, NotFoundError
from broker.common.message import MessageExt
from broker.common.message_view import describe_message
from core.cluster_queries import fan_out, readable_master_queues

# As RocketMQ's dashboard: a time-range query stops after this many messages (newest kept last).
TIME_QUERY_LIMIT = 2000
_PULL_BATCH = 32


@dataclass
class MessageList:
    views: list[dict]
    truncated: bool = False


async def _queue_range(
    core: AsyncMQAdmin, addr: str, topic: str, queue_id: int, begin: int, end: int, limit: int
) -> list[MessageExt]:
    low, high = await asyncio.gather(
        core.min_offset(addr, topic, queue_id), core.max_offset(addr, topic, queue_id)
    )
    start = max(await core.search_offset(addr, topic, queue_id, begin), low) if begin > 0 else low
    found: list[MessageExt] = []
    offset = start
    while offset < high and len(found) < limit:
        result = await core.pull_messages(addr, topic, queue_id, offset, min(_PULL_BATCH, high - offset))
        if result.status != "FOUND" or result.next_begin_offset <= offset:
            break
        for message in result.messages:
            if message.store_timestamp > end:
                return found  # store times grow along a queue: nothing later can match
            if message.store_timestamp >= begin:
                found.append(message)
        offset = result.next_begin_offset
    return found


async def _by_time(core: AsyncMQAdmin, topic: str, begin: int, end: int, limit: int) -> MessageList:
    route = await core.topic_route(topic)
    queues = [(q.broker_name, addr, q.queue_id) for q, addr in readable_master_queues(route)]
    results = await fan_out(
        [_queue_range(core, addr, topic, qid, begin, end, limit + 1) for _, addr, qid in queues]
    )
    views: list[dict] = []
    for (broker_name, _, _), messages in zip(queues, results, strict=True):
        if isinstance(messages, BaseException):
            raise messages
        views.extend(describe_message(m, broker_name) for m in messages)
    # Newest first, as operators read a time range; the limit keeps the newest.
    views.sort(key=lambda v: (v["store_timestamp"], v["queue_id"], v["queue_offset"]), reverse=True)
    return MessageList(views[:limit], len(views) > limit)


def messages_by_time(
    admin: MQAdmin, topic: str, begin: int, end: int, limit: int = TIME_QUERY_LIMIT
) -> MessageList:
    """Messages of every queue of ``topic`` stored in [begin, end] (epoch ms), newest first."""
    return admin.run(_by_time(admin.core, topic, begin, end, limit))


def describe_all(admin: MQAdmin, messages: list[MessageExt]) -> list[dict]:
    """Message views with the broker name of each message's store host."""
    info = admin.cluster_info()
    return [describe_message(m, info.broker_name_at(m.store_host) or "") for m in messages]


def messages_by_key(admin: MQAdmin, topic: str, key: str) -> MessageList:
    return MessageList(describe_all(admin, admin.query_message_by_key(topic, key)))


def messages_by_id(admin: MQAdmin, topic: str, msg_id: str) -> MessageList:
    """An offsetMsgId alone, or a client msgId within a topic (the unique-key index)."""
    found = admin.query_message_by_id(topic, msg_id) if topic else [admin.view_cluster_message(msg_id)]
    return MessageList(describe_all(admin, found))


# -- what each group did with one message ------------------------------------------------------

CONSUMED, NOT_CONSUMED_YET, NOT_ONLINE, BROADCASTING = (
    "CONSUMED",
    "NOT_CONSUME_YET",
    "NOT_ONLINE",
    "CONSUME_BROADCASTING",
)


@dataclass
class GroupTrack:
    group: str
    state: str
    consumer_offset: int | None
    clients: list[str]
    error: str = ""


async def _track_one(core: AsyncMQAdmin, message: MessageExt, broker_name: str, group: str) -> GroupTrack:
    try:
        progress = await core.consumer_progress(group, message.topic)
        offset = next(
            (
                q.consumer_offset
                for q in progress.queues
                if q.broker_name == broker_name and q.queue_id == message.queue_id
            ),
            None,
        )
    except NotFoundError:
        offset = None
    try:
        connection = await core.consumer_connection(group)
        clients, model = [c.client_id for c in connection.connections], connection.message_model
    except MQClientError:  # no consumer online is answered with an error code: a state, not a failure
        clients, model = [], ""
    if model == "BROADCASTING":
        state = BROADCASTING
    elif offset is not None and offset > message.queue_offset:
        state = CONSUMED
    elif not clients:
        state = NOT_ONLINE
    else:
        state = NOT_CONSUMED_YET
    return GroupTrack(group, state, offset, clients)


async def _track(core: AsyncMQAdmin, message: MessageExt) -> list[GroupTrack]:
    info = await core.cluster_info()
    broker_name = info.broker_name_at(message.store_host) or ""
    groups = await core.topic_consumed_by(message.topic)
    results = await fan_out([_track_one(core, message, broker_name, g) for g in groups])
    return [
        r if isinstance(r, GroupTrack) else GroupTrack(g, "UNKNOWN", None, [], str(r))
        for g, r in zip(groups, results, strict=True)
    ]


def message_track(admin: MQAdmin, message: MessageExt) -> list[GroupTrack]:
    """For every group consuming the message's topic: consumed or not (its committed offset on the
    message's queue is past the message), and which of its clients are online to resend to."""
    return admin.run(_track(admin.core, message))
