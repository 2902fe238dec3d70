"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and consumer offsets."""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

from broker.common import topic_config as tc
from broker.common.codes import RequestCode, ResponseCode
from broker.common.filter import check_subscription
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
from broker.remoting import fastjson
from broker.remoting.command import RemotingCommand, create_request, response_to

from ..client_manager import ClientChannel, now_ms

if TYPE_CHECKING:
    from ..controller import BrokerController

log = logging.getLogger(__name__)


class ClientProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def heartbeat(self, conn, request: RemotingCommand) -> RemotingCommand:
        data = fastjson.loads(request.body) if request.body else {}
        client_id = data.get("clientID") or ""
        if not client_id:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "the heartbeat has no clientID")
        channel = ClientChannel(conn, client_id, request.language, request.version, now_ms())
        conn.attributes["client_id"] = client_id
        for consumer in data.get("consumerDataSet") or []:
            for subscription in consumer.get("subscriptionDataSet") or []:
                refusal = self._subscription_refusal(subscription)
                if refusal is not None:  # as CHECK_CLIENT_CONFIG: never register a broken filter
                    return response_to(request, *refusal)
        for consumer in data.get("consumerDataSet") or []:
            self._consumer_heartbeat(consumer, channel)
        for producer in data.get("producerDataSet") or []:
            if producer.get("groupName"):
                self.broker.producers.register(producer["groupName"], channel)
        return response_to(request)

    def _consumer_heartbeat(self, consumer: dict, channel: ClientChannel) -> None:
        group = consumer.get("groupName")
        if not group:
            return
        config = self.broker.groups.find(group)
        if config is not None and consumer.get("messageModel", "CLUSTERING") == "CLUSTERING":
            perm = tc.PERM_READ | tc.PERM_WRITE
            if self.broker.topics.get(tc.retry_topic(group)) is None:
                self.broker.topics.ensure(tc.retry_topic(group), config.retry_queue_nums, perm)
                self.broker.register_soon()
        if self.broker.consumers.register(group, channel, consumer) and (
            config is None or config.notify_consumer_ids_changed_enable
        ):
            self.broker.notify_consumer_ids_changed(group)

    async def unregister(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        client_id = header.client_id
        if header.producer_group:
            self.broker.producers.unregister(header.producer_group, client_id)
        group = header.consumer_group
        if group and self.broker.consumers.unregister(group, client_id):
            self.broker.notify_consumer_ids_changed(group)
        return response_to(request)

    async def consumer_list(self, conn, request: RemotingCommand) -> RemotingCommand:
        group = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        info = self.broker.consumers.groups.get(group)
        if info is None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return response_to(request, body=fastjson.dumps({"consumerIdList": info.client_ids()}))

    async def check_client_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        data = fastjson.loads(request.body) if request.body else {}
        subscription = data.get("subscriptionData") or {}
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
        self.broker.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        return response_to(request)

    async def search_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_offset_in_queue_by_time(
            header.topic, header.queue_id, header.timestamp
        )
        return response_to(request, ext_fields=SearchOffsetResponseHeader(offset))

    async def max_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_max_offset_in_queue(header.topic, header.queue_id)
        return response_to(request, ext_fields=GetMaxOffsetResponseHeader(offset))

    async def min_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_min_offset_in_queue(header.topic, header.queue_id)
        return response_to(request, ext_fields=GetMinOffsetResponseHeader(offset))

    async def earliest_time(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        timestamp = self.broker.store.get_earliest_message_time(header.topic, header.queue_id)
        return response_to(request, ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp))

    async def all_consumer_offsets(self, conn, request: RemotingCommand) -> RemotingCommand:
        table = {key: dict(queues) for key, queues in self.broker.offsets.table.items()}
        return response_to(request, body=fastjson.dumps({"offsetTable": table}))


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
