"""Brokers, their configuration and their topics: clusterList, brokerStatus, get/updateBrokerConfig,
updateTopic, deleteTopic, topicStatus, and the broker's topic table."""

from __future__ import annotations

import json
import time
from typing import Any

from broker.client.client_api import answer_header
from broker.client.errors import MQClientError
from broker.common.codes import RequestCode
from broker.common.conf_file import format_properties, parse_properties
from broker.common.request_headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetTopicStatsInfoRequestHeader,
    PurgeDamagedCommitLogRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC, validate_topic

from .core import BROKER, NAME_SERVER, AdminCore, known_cluster
from .parse import as_int, mq_table, runtime_figure
from .results import BrokerConfigState, BrokerSummary, DamagedCommitLogRange, QueueOffsetStatus, TopicStatus


class ClusterRequests(AdminCore):
    async def cluster_list(self, cluster: str | None = None) -> list[BrokerSummary]:
        """Every broker address of the cluster(s) with version, TPS, data age and disk use."""
        info = await self.cluster_info()
        names = [cluster] if cluster else sorted(info.clusters)
        rows: list[BrokerSummary] = []
        for name in names:
            for data in known_cluster(info, name).brokers_of(name):
                for broker_id, addr in sorted(data.broker_addrs.items()):
                    rows.append(await self._broker_summary(name, data.broker_name, broker_id, addr))
        return rows

    async def _broker_summary(
        self, cluster: str, broker_name: str, broker_id: int, addr: str
    ) -> BrokerSummary:
        # A broker registered on the name server may already be gone: show it with the reason
        # rather than failing the whole listing, as an operator wants to see that broker.
        try:
            kv = await self.broker_runtime_info(addr)
            error = None
        except MQClientError as exc:
            kv, error = {}, str(exc)
        return broker_summary(cluster, broker_name, broker_id, addr, kv, error)

    # -- a broker's runtime and configuration --------------------------------------------------

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        table = (await self._broker_json(addr, RequestCode.GET_BROKER_RUNTIME_INFO)).get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    async def purge_damaged_commit_log(
        self, addr: str, from_offset: int | None = None
    ) -> list[DamagedCommitLogRange]:
        """Overwrite the broker's quarantined damaged commit-log data and close those entries:
        the range starting at ``from_offset``, or every open one. Returns the ranges purged
        (empty when none was open). An offset where no open range starts is refused
        (``MQBrokerError``, SYSTEM_ERROR, the remark lists the open ranges' starts); so is a
        caller without admin rights when the broker enforces ACL (NO_PERMISSION)."""
        header = PurgeDamagedCommitLogRequestHeader(from_offset=from_offset)
        data = await self._broker_json(addr, RequestCode.PURGE_DAMAGED_COMMIT_LOG, header)
        return [DamagedCommitLogRange.from_json(item) for item in data.get("purged") or []]

    async def broker_config(self, addr: str) -> dict[str, str]:
        return (await self.broker_config_state(addr)).values

    async def broker_config_state(self, addr: str) -> BrokerConfigState:
        """The values the broker runs with and those it accepted that wait for its restart
        (the ``pendingRestart`` field of GET_BROKER_CONFIG; none from brokers that send none)."""
        response = await self._request(addr, RequestCode.GET_BROKER_CONFIG)
        server = f"{BROKER} {addr}"
        answer = answer_header(GetBrokerConfigResponseHeader, response, server)
        try:
            pending = json.loads(answer.pending_restart or "{}")
        except ValueError:
            pending = None
        if not isinstance(pending, dict):
            raise MQClientError(
                f"{server} answered with a header field 'pendingRestart' that is no JSON object"
            )
        pending = {str(k): str(v) for k, v in pending.items()}
        values = parse_properties((response.body or b"").decode("utf-8", errors="replace"))
        return BrokerConfigState(dict(sorted(values.items())), pending)

    async def update_broker_config(self, addr: str, properties: dict[str, str]) -> str:
        """Returns the broker's remark: which values apply now, which need a restart."""
        body = format_properties(properties).encode("utf-8")
        response = await self._request(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        return response.remark or ""

    # -- topics ------------------------------------------------------------------------------

    async def create_or_update_topic(
        self,
        addr: str,
        topic: str,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        order: bool = False,
    ) -> None:
        problem = validate_topic(topic)
        if problem:
            raise MQClientError(f"invalid topic: {problem}")
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            order=order,
            topic_sys_flag=0,
        )
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete from the cluster's masters (or every broker of the route) and every name server.

        Returns the broker addresses the topic was deleted from.
        """
        problem = validate_topic(topic)
        if problem:
            raise MQClientError(f"invalid topic: {problem}")
        addrs = (
            await self.resolve_masters(None, cluster)
            if cluster
            else (await self.topic_route(topic)).master_addrs()
        )
        for addr in addrs:
            await self._request(addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic))
        header = DeleteTopicFromNamesrvRequestHeader(topic, cluster or None)
        for addr in self.namesrv_addrs:
            await self._request(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, header, role=NAME_SERVER)
        return addrs

    async def topic_status(self, topic: str) -> TopicStatus:
        route = await self.topic_route(topic)
        queues: list[QueueOffsetStatus] = []
        for data in route.broker_datas:
            if data.master_addr:
                queues.extend(await self.topic_queue_offsets(data.master_addr, data.broker_name, topic))
        queues.sort(key=lambda q: (q.broker_name, q.queue_id))
        return TopicStatus(topic=topic, queues=queues)

    async def topic_queue_offsets(self, addr: str, broker_name: str, topic: str) -> list[QueueOffsetStatus]:
        """One broker's GET_TOPIC_STATS_INFO of a topic: its queues' min and max offsets. For a
        caller that knows where the topic lives (from the brokers' topic tables) without asking
        the name server for its route."""
        stats = await self._broker_json(
            addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic)
        )
        return [
            QueueOffsetStatus(
                broker_name=mq.get("brokerName", broker_name),
                queue_id=int(mq.get("queueId", 0)),
                min_offset=as_int(offsets.get("minOffset")),
                max_offset=as_int(offsets.get("maxOffset")),
                last_update_timestamp=as_int(offsets.get("lastUpdateTimestamp")),
            )
            for mq, offsets in mq_table(stats.get("offsetTable"))
        ]

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """Groups holding offsets for the topic on any of its brokers."""
        groups: set[str] = set()
        header = QueryTopicConsumeByWhoRequestHeader(topic)
        for addr in (await self.topic_route(topic)).master_addrs():
            answer = await self._broker_json(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header)
            groups.update(answer.get("groupList") or [])
        return sorted(groups)

    async def all_topic_configs(self, addr: str) -> dict[str, dict[str, Any]]:
        """The broker's topic table (GET_ALL_TOPIC_CONFIG): name → TopicConfig JSON (RocketMQ names)."""
        table = (await self._broker_json(addr, RequestCode.GET_ALL_TOPIC_CONFIG)).get(
            "topicConfigTable"
        ) or {}
        return {str(name): dict(config) for name, config in sorted(table.items())}


def broker_summary(
    cluster: str, broker_name: str, broker_id: int, addr: str, kv: dict[str, str], error: str | None
) -> BrokerSummary:
    """A ``clusterList`` row from a broker's runtime info (``kv``; empty with the ``error`` that
    kept it from answering)."""

    def total(key: str) -> int:  # a message count of the runtime info
        return as_int(kv.get(key))

    earliest = as_int(kv.get("earliestMessageTimeStamp"))
    hours = (time.time() * 1000 - earliest) / 3_600_000 if earliest > 0 else 0.0
    return BrokerSummary(
        cluster=cluster,
        broker_name=broker_name,
        broker_id=broker_id,
        addr=addr,
        version=kv.get("brokerVersionDesc", ""),
        in_tps=runtime_figure(kv.get("putTps")),
        out_tps=runtime_figure(kv.get("getTransferredTps") or kv.get("getTransferedTps")),
        page_cache_lock_ms=as_int(kv.get("pageCacheLockTimeMills")),
        hours_of_data=round(hours, 2),
        disk_ratio=runtime_figure(kv.get("commitLogDiskRatio")),
        runtime_error=error,
        in_total_yesterday=total("msgPutTotalTodayMorning") - total("msgPutTotalYesterdayMorning"),
        out_total_yesterday=total("msgGetTotalTodayMorning") - total("msgGetTotalYesterdayMorning"),
        in_total_today=total("msgPutTotalTodayNow") - total("msgPutTotalTodayMorning"),
        out_total_today=total("msgGetTotalTodayNow") - total("msgGetTotalTodayMorning"),
        request_wait_ms=as_int(kv.get("sendThreadPoolQueueHeadWaitTimeMills")),
    )
