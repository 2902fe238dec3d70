"""Consumer and producer groups and their offsets: updateSubGroup, deleteSubGroup,
consumerProgress, consumerConnection, producerConnection, resetOffsetByTime, and the per-queue
offset requests they are made of."""

from __future__ import annotations

import json
from typing import Any

from broker.client.client_api import answer_header
from broker.client.errors import MQBrokerError, MQClientError, NotFoundError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.names import group_problem
from broker.common.request_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetProducerConnectionListRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX

from .core import BROKER, AdminCore
from .parse import as_int, connections, consumer_connection, json_body, mq_table, progress_rows
from .results import (
    ConsumeProgress,
    ConsumerConnection,
    ConsumerGroupSummary,
    ProducerConnection,
    QueueConsumeProgress,
    ResetOffsetEntry,
)

# RocketMQ's SubscriptionGroupConfig defaults, under its JSON names.
_SUBSCRIPTION_GROUP_DEFAULTS = {
    "consumeEnable": True,
    "consumeFromMinEnable": True,
    "consumeBroadcastEnable": True,
    "consumeMessageOrderly": False,
    "retryQueueNums": 1,
    "retryMaxTimes": 16,
    "brokerId": 0,
    "whichBrokerWhenConsumeSlowly": 1,
    "notifyConsumerIdsChangedEnable": True,
}
_NO_CONSUME_STATS = (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)


class GroupRequests(AdminCore):
    # -- subscription groups -------------------------------------------------------------------

    async def create_or_update_subscription_group(
        self, addr: str, group: str, **options: Any
    ) -> dict[str, Any]:
        """Send a SubscriptionGroupConfig; ``options`` are its snake_case fields.

        Returns the config as sent (RocketMQ field names) so callers can show it.
        """
        _check_group(group)
        config = _subscription_group_config(group, options)
        body = json.dumps(config, separators=(",", ":")).encode("utf-8")
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        return config

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        _check_group(group)
        header = DeleteSubscriptionGroupRequestHeader(group, remove_offset)
        await self._request(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)

    async def all_subscription_groups(self, addr: str) -> dict[str, dict[str, Any]]:
        """The broker's group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): name → SubscriptionGroupConfig."""
        answer = await self._broker_json(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = answer.get("subscriptionGroupTable") or {}
        return {str(name): dict(config) for name, config in sorted(table.items())}

    # -- consumers and producers ---------------------------------------------------------------

    async def consumer_progress(self, group: str, topic: str | None = None) -> ConsumeProgress:
        info = await self.cluster_info()
        queues: list[QueueConsumeProgress] = []
        tps = 0.0
        for addr in await self._group_broker_addrs(group):
            broker_tps, rows = await self.broker_consume_stats(addr, group, topic, info.broker_name_of(addr))
            tps += broker_tps
            queues.extend(rows)
        if not queues:
            raise NotFoundError(f"consumer group {group!r} has no consume progress on any broker")
        queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
        return ConsumeProgress(
            group=group, queues=queues, consume_tps=round(tps, 2), diff_total=sum(q.diff for q in queues)
        )

    async def broker_consume_stats(
        self, addr: str, group: str, topic: str | None = None, broker_name: str | None = None
    ) -> tuple[float, list[QueueConsumeProgress]]:
        """One broker's GET_CONSUME_STATS of a group: (consume TPS, per-queue rows), or (0.0, [])
        when that broker knows neither the group nor the topic."""
        header = GetConsumeStatsRequestHeader(group, topic or None)
        response = await self._request_unless(addr, RequestCode.GET_CONSUME_STATS, header, _NO_CONSUME_STATS)
        if response is None:
            return 0.0, []
        stats = json_body(response, f"{BROKER} {addr}")
        rows = progress_rows(stats.get("offsetTable"), broker_name or addr)
        return float(stats.get("consumeTps") or 0.0), rows

    async def consumer_groups_progress(self) -> list[ConsumerGroupSummary]:
        """Every group that has a retry topic, with its online clients and total lag."""
        rows = []
        for topic in await self.topic_list():
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                continue
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            rows.append(await self._group_summary(group))
        return rows

    async def _group_summary(self, group: str) -> ConsumerGroupSummary:
        try:
            progress = await self.consumer_progress(group)
            tps, diff = progress.consume_tps, progress.diff_total
        except NotFoundError:
            tps, diff = 0.0, 0
        try:
            conn = await self.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            return ConsumerGroupSummary(group, 0, None, "", "", tps, diff)
        version = max((c.version for c in conn.connections), default=None)
        return ConsumerGroupSummary(
            group, len(conn.connections), version, conn.consume_type, conn.message_model, tps, diff
        )

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        addrs = [broker_addr] if broker_addr else await self._group_broker_addrs(group)
        header = GetConsumerConnectionListRequestHeader(group)
        raw = await self._first_success(addrs, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
        return consumer_connection(group, raw)

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        addrs = (await self.topic_route(topic)).master_addrs()
        header = GetProducerConnectionListRequestHeader(group)
        raw = await self._first_success(addrs, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
        return ProducerConnection(group=group, connections=connections(raw.get("connectionSet")))

    async def consumer_running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """One online consumer's ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO, relayed by a broker
        the client is connected to): its properties, subscriptions and the queues it holds."""
        header = GetConsumerRunningInfoRequestHeader(group, client_id, jstack_enable=False)
        addrs = await self._group_broker_addrs(group)
        return await self._first_success(addrs, RequestCode.GET_CONSUMER_RUNNING_INFO, header)

    # -- offsets -------------------------------------------------------------------------------

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp: int, force: bool = True
    ) -> list[ResetOffsetEntry]:
        """Move the group's offsets on every broker of the topic to the first message at ``timestamp``.

        Online consumers are told by the broker (INVOKE_BROKER_TO_RESET_OFFSET). When the group has
        no consumer online the broker refuses with CONSUMER_NOT_ONLINE; then, as RocketMQ's tool
        does, the committed offsets are rewritten directly (search by time + update offset).
        """
        route = await self.topic_route(topic)
        entries: list[ResetOffsetEntry] = []
        header = ResetOffsetRequestHeader(topic, group, timestamp, is_force=force)
        for data in route.broker_datas:
            addr = data.master_addr
            if not addr:
                continue
            response = await self._request_unless(
                addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, (ResponseCode.CONSUMER_NOT_ONLINE,)
            )
            if response is None:
                entries.extend(
                    await self._reset_offline(addr, data.broker_name, group, topic, timestamp, force)
                )
                continue
            table = json_body(response, f"{BROKER} {addr}").get("offsetTable")
            for mq, offset in mq_table(table):
                entries.append(
                    ResetOffsetEntry(
                        mq.get("brokerName", data.broker_name), int(mq.get("queueId", 0)), as_int(offset)
                    )
                )
        entries.sort(key=lambda e: (e.broker_name, e.queue_id))
        return entries

    async def _reset_offline(
        self, addr: str, broker_name: str, group: str, topic: str, timestamp: int, force: bool
    ) -> list[ResetOffsetEntry]:
        stats = await self._broker_json(
            addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group, topic)
        )
        entries = []
        for mq, wrapper in mq_table(stats.get("offsetTable")):
            queue_id = int(mq.get("queueId", 0))
            current = as_int(wrapper.get("consumerOffset"))
            target = await self.search_offset(addr, topic, queue_id, timestamp)
            # Without force an offset only moves backwards, so nothing gets skipped unread.
            if force or target < current:
                await self.update_consumer_offset(addr, group, topic, queue_id, target)
            else:
                target = current
            entries.append(ResetOffsetEntry(broker_name, queue_id, target))
        return entries

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        header = SearchOffsetRequestHeader(topic, queue_id, timestamp)
        response = await self._request(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header)
        return answer_header(SearchOffsetResponseHeader, response, f"{BROKER} {addr}").offset

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        await self._request(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        header = GetMinOffsetRequestHeader(topic, queue_id)
        response = await self._request(addr, RequestCode.GET_MIN_OFFSET, header)
        return answer_header(GetMinOffsetResponseHeader, response, f"{BROKER} {addr}").offset

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        header = GetMaxOffsetRequestHeader(topic, queue_id)
        response = await self._request(addr, RequestCode.GET_MAX_OFFSET, header)
        return answer_header(GetMaxOffsetResponseHeader, response, f"{BROKER} {addr}").offset

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset of one queue, or -1 when it has none (QUERY_NOT_FOUND, or,
        as the SDK reads it, SUCCESS without an offset)."""
        header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
        response = await self._request_unless(
            addr, RequestCode.QUERY_CONSUMER_OFFSET, header, (ResponseCode.QUERY_NOT_FOUND,)
        )
        if response is None:
            return -1
        offset = answer_header(QueryConsumerOffsetResponseHeader, response, f"{BROKER} {addr}").offset
        return -1 if offset is None else offset


def _check_group(group: str) -> None:
    problem = group_problem(group)
    if problem:
        raise MQClientError(f"invalid group: {problem}")


def _subscription_group_config(group: str, options: dict[str, Any]) -> dict[str, Any]:
    """RocketMQ's SubscriptionGroupConfig JSON from snake_case options over its defaults."""
    config: dict[str, Any] = {"groupName": group, **_SUBSCRIPTION_GROUP_DEFAULTS}
    for name, value in options.items():
        if value is None:
            continue
        head, *rest = name.split("_")
        camel = head + "".join(part.capitalize() for part in rest)
        if camel not in config:
            raise MQClientError(f"unknown subscription group option {name!r}")
        config[camel] = value
    return config
