"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and consumer offsets."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.common import fastjson
from broker.common import topic_config as tc
from broker.common.codes import RequestCode, ResponseCode
from broker.common.filter import check_subscription, is_tag_type
from broker.common.java_enums import CONSUMER_DATA, EnumValueError, read_enum_fields
from broker.common.names import topic_problem
from broker.common.request_headers import (
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    NotifyConsumerIdsChangedRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.remoting.command import RemotingCommand, create_request, response_to

from ..client_manager import ClientChannel, now_ms
from .disk_refusal import disk_full_refusal
from .name_checks import name_problem, name_refusal

if TYPE_CHECKING:
    from broker.store.message_store import MessageStore

    from ..controller import BrokerController

log = logging.getLogger(__name__)

# SQL92 text one heartbeat may ask the broker to compile (each expression is at most
# MAX_SQL_LENGTH): compiling runs on the event loop. Known expressions are cached, so a consumer's
# repeated heartbeats cost nothing; this bounds the first one, or one full of new expressions.
MAX_HEARTBEAT_SQL_CHARS = 16 * 1024
# Groups one heartbeat may name (consumers, and producers, each): one client instance runs a few.
# Each new one is registered, maybe created, and its members told; 1,000 held the loop seconds.
MAX_HEARTBEAT_GROUPS = 256


def _heartbeat_parts(data: object) -> tuple[str, list[dict], list[dict]] | str:
    """``(clientID, consumer data, producer data)`` of a heartbeat body, or what is wrong with it."""
    if not isinstance(data, dict):
        return "the body is not a JSON object"
    client_id = data.get("clientID") or ""
    if not isinstance(client_id, str) or not client_id:
        return "the heartbeat has no clientID"
    consumers, producers = data.get("consumerDataSet") or [], data.get("producerDataSet") or []
    if not isinstance(consumers, list) or not all(isinstance(c, dict) for c in consumers):
        return "consumerDataSet is not a list of objects"
    if not isinstance(producers, list) or not all(isinstance(p, dict) for p in producers):
        return "producerDataSet is not a list of objects"
    if max(len(consumers), len(producers)) > MAX_HEARTBEAT_GROUPS:
        return (
            f"it names {len(consumers)} consumer and {len(producers)} producer groups, "
            f"more than {MAX_HEARTBEAT_GROUPS} of either"
        )
    for consumer in consumers:
        try:  # the C++ client sends ordinals: the group's model decides its retry topic
            read_enum_fields(consumer, CONSUMER_DATA)
        except EnumValueError as exc:
            return str(exc)
        subscriptions = consumer.setdefault("subscriptionDataSet", []) or []
        if not isinstance(subscriptions, list) or not all(isinstance(s, dict) for s in subscriptions):
            return "a consumer's subscriptionDataSet is not a list of objects"
        consumer["subscriptionDataSet"] = subscriptions
    return client_id, consumers, producers


class ClientProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def heartbeat(self, conn, request: RemotingCommand) -> RemotingCommand:
        data = fastjson.loads(request.body) if request.body else {}
        parts = _heartbeat_parts(data)
        if isinstance(parts, str):
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"the heartbeat is malformed: {parts}")
        client_id, consumers, producers = parts
        refusal = self._heartbeat_refusal(consumers, producers)
        if refusal is not None:  # as CHECK_CLIENT_CONFIG: never register a broken filter or name
            return response_to(request, *refusal)
        channel = ClientChannel(conn, client_id, request.language, request.version, now_ms())
        conn.attributes["client_id"] = client_id
        broker = self.broker
        with broker.groups.deferred_persist(), broker.topics.deferred_persist():
            created = [self._consumer_heartbeat(consumer, channel) for consumer in consumers]
        for producer in producers:
            if producer.get("groupName"):
                self.broker.producers.register(producer["groupName"], channel)
        if any(created):  # as RocketMQ: the group's clients find its new retry route at once
            await broker.registered()
        return response_to(request)

    def _heartbeat_refusal(self, consumers: list[dict], producers: list[dict]) -> tuple[int, str] | None:
        """The first reason to refuse a heartbeat: an illegal group or topic name (SYSTEM_ERROR),
        or a subscription this broker cannot filter by."""
        sql_chars = 0
        for consumer in consumers:
            subscriptions = consumer["subscriptionDataSet"]
            problem = name_problem(
                (s.get("topic") for s in subscriptions), (consumer.get("groupName") or None,)
            )
            if problem:
                return ResponseCode.SYSTEM_ERROR, problem
            for subscription in subscriptions:
                expression = subscription.get("subString")
                if not is_tag_type(subscription.get("expressionType")) and isinstance(expression, str):
                    sql_chars += len(expression)
                if sql_chars > MAX_HEARTBEAT_SQL_CHARS:
                    return ResponseCode.SUBSCRIPTION_PARSE_FAILED, (
                        f"the heartbeat's SQL92 subscriptions exceed {MAX_HEARTBEAT_SQL_CHARS} "
                        "characters in all"
                    )
                refusal = self._subscription_refusal(subscription)
                if refusal is not None:
                    return refusal
        problem = name_problem(groups=(p.get("groupName") or None for p in producers))
        return None if problem is None else (ResponseCode.SYSTEM_ERROR, problem)

    def _consumer_heartbeat(self, consumer: dict, channel: ClientChannel) -> bool:
        """Register one consumer of the heartbeat; True when its group's retry topic was created."""
        group = consumer.get("groupName")
        if not group:
            return False
        created = False
        config = self.broker.groups.find(group)
        # A group of 121-127 characters is legal, but its retry topic would pass the topic limit
        # (and the stored record's 127-byte topic field): it consumes without one.
        if (
            config is not None
            and consumer.get("messageModel", "CLUSTERING") == "CLUSTERING"
            and topic_problem(tc.retry_topic(group)) is None
        ):
            perm = tc.PERM_READ | tc.PERM_WRITE
            created = self.broker.topics.get(tc.retry_topic(group)) is None and bool(
                self.broker.topics.ensure(tc.retry_topic(group), config.retry_queue_nums, perm)
            )
        if self.broker.consumers.register(group, channel, consumer) and (
            config is None or config.notify_consumer_ids_changed_enable
        ):
            self.broker.notify_consumer_ids_changed(group)
        return created

    async def unregister(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        refused = name_refusal(request, groups=(header.producer_group or None, header.consumer_group or None))
        if refused is not None:
            return refused
        client_id = header.client_id
        if header.producer_group:
            self.broker.producers.unregister(header.producer_group, client_id)
        group = header.consumer_group
        if group and self.broker.consumers.unregister(group, client_id):
            self.broker.notify_consumer_ids_changed(group)
        return response_to(request)

    async def consumer_list(self, conn, request: RemotingCommand) -> RemotingCommand:
        group = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        refused = name_refusal(request, groups=(group,))
        if refused is not None:
            return refused
        info = self.broker.consumers.groups.get(group)
        if info is None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return response_to(request, body=fastjson.dumps({"consumerIdList": info.client_ids()}))

    async def check_client_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        data = fastjson.loads(request.body) if request.body else {}
        subscription = data.get("subscriptionData") if isinstance(data, dict) else None
        if not isinstance(subscription, dict):
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "the request has no subscriptionData object"
            )
        refused = name_refusal(request, (subscription.get("topic"),), (data.get("group") or None,))
        if refused is not None:
            return refused
        refusal = self._subscription_refusal(subscription)
        if refusal is not None:
            return response_to(request, *refusal)
        return response_to(request)

    def _subscription_refusal(self, subscription: dict) -> tuple[int, str] | None:
        """RocketMQ's code and reason when this broker cannot serve ``subscription``."""
        problem = check_subscription(
            subscription.get("expressionType"),
            subscription.get("subString"),
            self.broker.config.enable_property_filter,
        )
        if problem is None:
            return None
        unsupported, reason = problem
        if unsupported:
            return ResponseCode.SYSTEM_ERROR, reason
        topic = subscription.get("topic", "")
        return ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"the subscription of {topic} is invalid: {reason}"


class OffsetProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def query_consumer_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        refused = name_refusal(request, (topic,), (group,))
        if refused is not None:
            return refused
        offset = self.broker.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return response_to(request, ext_fields=QueryConsumerOffsetResponseHeader(offset))
        # A group that never committed starts from 0 while the queue still holds its first message
        # and that message is recent (as RocketMQ: minOffset <= 0 && !checkInDiskByConsumeOffset);
        # otherwise QUERY_NOT_FOUND lets the client apply consumeFromWhere (LAST_OFFSET: the tail).
        store = self.broker.store
        if store.get_min_offset_in_queue(topic, queue_id) <= 0 and not self._first_message_in_disk(
            topic, queue_id
        ):
            return response_to(request, ext_fields=QueryConsumerOffsetResponseHeader(0))
        return response_to(
            request,
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def _first_message_in_disk(self, topic: str, queue_id: int) -> bool:
        """RocketMQ's ``checkInDiskByConsumeOffset(topic, queueId, 0)``: the queue's message at
        offset 0 lies further behind the commit log's end than the share of physical memory
        (``accessMessageInMemoryMaxRatio``) reads are expected to find in the page cache."""
        store = self.broker.store
        if store.get_max_offset_in_queue(topic, queue_id) <= 0:
            return False  # no message at offset 0
        physical = store.get_commit_log_offset_in_queue(topic, queue_id, 0)
        in_memory = total_physical_memory() * self.broker.config.access_message_in_memory_max_ratio // 100
        return store.max_physic_offset - physical > in_memory

    async def update_consumer_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        refused = name_refusal(request, (header.topic,), (header.consumer_group,))
        if refused is not None:
            return refused
        # As RocketMQ 5: only a queue the broker has takes an offset, so the offset table (kept in
        # memory and rewritten to disk whole) cannot be grown with made-up topics and queue ids.
        config = self.broker.topics.get(header.topic)
        if config is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        if not 0 <= header.queue_id < max(config.read_queue_nums, config.write_queue_nums):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic[{header.topic}] has "
                f"{max(config.read_queue_nums, config.write_queue_nums)} queues",
            )
        full = disk_full_refusal(self.broker.store, request)
        if full is not None:
            return full
        # As RocketMQ 5, a group the broker does not have takes no offset (else made-up names grow
        # the offset table and the stats without end); unlike it, one that may be created on first
        # use is, as a heartbeat would, so the group limit bounds them. Checked last: a commit
        # refused for its topic or queue creates no group.
        if self.broker.groups.find(header.consumer_group) is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                self.broker.groups.missing_remark(header.consumer_group),
            )
        self.broker.commit_consumer_offset(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return response_to(request)

    async def queue_position(self, conn, request: RemotingCommand) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME:
        one queue's position (or time) as the store knows it, each in its own response header."""
        header_type, lookup, answer_type = QUEUE_POSITION_QUERIES[request.code]
        header = header_type.from_ext_fields(request.ext_fields)
        refused = name_refusal(request, (header.topic,))
        if refused is not None:
            return refused
        return response_to(request, ext_fields=answer_type(lookup(self.broker.store, header)))

    async def all_consumer_offsets(self, conn, request: RemotingCommand) -> RemotingCommand:
        table = {key: dict(queues) for key, queues in self.broker.offsets.table.items()}
        return response_to(request, body=fastjson.dumps({"offsetTable": table}))


# What each queue-position request reads (its header), asks the store, and answers with.
QUEUE_POSITION_QUERIES: dict[int, tuple[type[Any], Callable[[MessageStore, Any], int], type[Any]]] = {
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: (
        SearchOffsetRequestHeader,
        lambda store, h: store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp),
        SearchOffsetResponseHeader,
    ),
    RequestCode.GET_MAX_OFFSET: (
        GetMaxOffsetRequestHeader,
        lambda store, h: store.get_max_offset_in_queue(h.topic, h.queue_id),
        GetMaxOffsetResponseHeader,
    ),
    RequestCode.GET_MIN_OFFSET: (
        GetMinOffsetRequestHeader,
        lambda store, h: store.get_min_offset_in_queue(h.topic, h.queue_id),
        GetMinOffsetResponseHeader,
    ),
    RequestCode.GET_EARLIEST_MSG_STORETIME: (
        GetEarliestMsgStoretimeRequestHeader,
        lambda store, h: store.get_earliest_message_time(h.topic, h.queue_id),
        GetEarliestMsgStoretimeResponseHeader,
    ),
}


@functools.cache
def total_physical_memory() -> int:
    """Bytes of RAM on this machine (RocketMQ's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf: RocketMQ's own fallback, 24 GiB
        return 24 * 1024**3


def notify_request(group: str) -> RemotingCommand:
    header = NotifyConsumerIdsChangedRequestHeader(group)
    return create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header.to_ext_fields(), oneway=True)
