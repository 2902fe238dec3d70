"""Administration API over the remoting protocol (RocketMQ's ``DefaultMQAdminExt``).

``MQAdmin`` talks to name servers and brokers with RocketMQ's admin request codes and returns typed
results (dataclasses below); it never prints. The ``mqadmin`` CLI and the web console are both
thin layers over it. Every failure is an ``MQAdminError`` whose message says which address failed
and why, or which RocketMQ response code a broker answered with.
"""

from __future__ import annotations

import datetime
import functools
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import MessageExt
from broker.common.message_codec import (
    MessageDecodeError,
    decode_messages,
    decode_offset_msg_id,
)
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX, validate_topic
from broker.remoting import fastjson
from broker.remoting.client import EventLoopThread, RemotingClient
from broker.remoting.command import create_request
from broker.remoting.errors import RemotingError, RemotingTimeoutError

__all__ = [
    "AdminRequestError",
    "AsyncMQAdmin",
    "BrokerData",
    "BrokerSummary",
    "BrokerUnreachableError",
    "ClientConnection",
    "ClusterInfo",
    "ConsumeProgress",
    "ConsumerConnection",
    "ConsumerGroupSummary",
    "MQAdmin",
    "MQAdminError",
    "NameServerUnreachableError",
    "NotFoundError",
    "ProducerConnection",
    "PullResult",
    "QueueConsumeProgress",
    "QueueData",
    "QueueOffsetStatus",
    "ResetOffsetEntry",
    "Subscription",
    "TopicRoute",
    "TopicStatus",
    "parse_timestamp",
]

# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class MQAdminError(Exception):
    """Any admin operation that could not be done; the message is meant for an operator."""


class NotFoundError(MQAdminError):
    """The thing asked about (topic route, cluster, group, message) does not exist."""


class _UnreachableError(MQAdminError):
    role = "server"

    def __init__(self, addr: str, reason: str) -> None:
        self.addr = addr
        self.reason_text = reason
        super().__init__(f"cannot reach {self.role} {addr} ({reason})")


class NameServerUnreachableError(_UnreachableError):
    role = "name server"


class BrokerUnreachableError(_UnreachableError):
    role = "broker"


class AdminRequestError(MQAdminError):
    """A server answered with a RocketMQ error code: names the server, the code and its remark."""

    def __init__(self, role: str, addr: str, code: int, remark: str | None) -> None:
        self.role, self.addr, self.code, self.remark = role, addr, code, remark or ""
        self.code_name = _code_name(code)
        detail = f": {self.remark}" if self.remark else ""
        super().__init__(f"{role} {addr} answered {self.code_name} ({code}){detail}")


MASTER_ID = 0
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def any_addr(self) -> str | None:
        """The master, else the lowest-id slave: reads may be served by either."""
        if not self.broker_addrs:
            return None
        return self.broker_addrs.get(MASTER_ID) or self.broker_addrs[min(self.broker_addrs)]


@dataclass(frozen=True)
class ClusterInfo:
    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def brokers_of(self, cluster: str) -> list[BrokerData]:
        if cluster not in self.clusters:
            raise NotFoundError(f"cluster {cluster!r} is not known to the name server")
        return [self.brokers[name] for name in sorted(self.clusters[cluster]) if name in self.brokers]

    def master_addrs(self, cluster: str) -> list[str]:
        return [b.master_addr for b in self.brokers_of(cluster) if b.master_addr]

    def all_addrs(self, cluster: str) -> list[str]:
        return [addr for b in self.brokers_of(cluster) for _, addr in sorted(b.broker_addrs.items())]

    def all_master_addrs(self) -> list[str]:
        return [b.master_addr for _, b in sorted(self.brokers.items()) if b.master_addr]

    def broker_name_of(self, addr: str) -> str | None:
        for data in self.brokers.values():
            if addr in data.broker_addrs.values():
                return data.broker_name
        return None


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None

    def master_addrs(self) -> list[str]:
        return [b.master_addr for b in self.broker_datas if b.master_addr]

    def broker(self, broker_name: str) -> BrokerData:
        for data in self.broker_datas:
            if data.broker_name == broker_name:
                return data
        raise NotFoundError(f"broker {broker_name!r} is not in the route of topic {self.topic!r}")


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


# ---------------------------------------------------------------------------------------------
# Timestamps accepted by resetOffsetByTime / queryMsgByKey
# ---------------------------------------------------------------------------------------------

_HUMAN_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"


def parse_timestamp(text: str) -> int:
    """``now``, milliseconds since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS`` → epoch ms."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.datetime.strptime(value, _HUMAN_TIME_FORMAT)
    except ValueError:
        raise ValueError(
            f"bad timestamp {text!r}: use now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(moment.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------


class AsyncMQAdmin:
    """The admin client's asyncio core (for ASGI views and other coroutines); ``MQAdmin`` below is
    the blocking face of the same methods. Reusable across calls; close it when done.

    ``namesrv_addr`` is RocketMQ's ``host:port;host:port`` list. Name servers are tried in order
    (they hold the same state, N3), so one dead name server does not fail a command.
    """

    def __init__(self, namesrv_addr: str | Iterable[str], timeout: float = 3.0) -> None:
        if isinstance(namesrv_addr, str):
            addrs = [a.strip() for a in namesrv_addr.split(";")]
        else:
            addrs = [a.strip() for a in namesrv_addr]
        # An empty list is allowed: commands aimed at one broker address need no name server.
        self.namesrv_addrs = [a for a in addrs if a]
        self._wire = _AdminWire(timeout)

    async def close(self) -> None:
        await self._wire.close()

    async def __aenter__(self) -> AsyncMQAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- name server -------------------------------------------------------------------------

    async def _namesrv(self, code: int, fields: dict[str, Any] | None = None) -> _Reply:
        """Ask the first name server that answers; connection failures move to the next one."""
        if not self.namesrv_addrs:
            raise MQAdminError("no name server address given (use -n host:port or set NAMESRV_ADDR)")
        failures: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                return await self._wire.call(addr, code, fields, role="name server")
            except NameServerUnreachableError as exc:
                failures.append(exc.reason_text)
        raise NameServerUnreachableError(";".join(self.namesrv_addrs), "; ".join(failures))

    async def cluster_info(self) -> ClusterInfo:
        reply = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        reply.raise_unless_success()
        return _parse_cluster_info(reply.json())

    async def topic_list(self) -> list[str]:
        reply = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        reply.raise_unless_success()
        return sorted(reply.json().get("topicList") or [])

    async def topic_route(self, topic: str) -> TopicRoute:
        reply = await self._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NotFoundError(f"no route for topic {topic!r} on the name server")
        reply.raise_unless_success()
        return _parse_topic_route(topic, reply.json())

    async def cluster_list(self, cluster: str | None = None) -> list[BrokerSummary]:
        """Every broker address of the cluster(s) with version, TPS, data age and disk use."""
        info = await self.cluster_info()
        names = [cluster] if cluster else sorted(info.clusters)
        rows: list[BrokerSummary] = []
        for name in names:
            for data in info.brokers_of(name):
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
        except MQAdminError as exc:
            kv, error = {}, str(exc)

        def total(key: str) -> int:  # a message count of the runtime info
            return _as_int(kv.get(key))

        earliest = _as_int(kv.get("earliestMessageTimeStamp"))
        hours = (time.time() * 1000 - earliest) / 3_600_000 if earliest > 0 else 0.0
        return BrokerSummary(
            cluster=cluster,
            broker_name=broker_name,
            broker_id=broker_id,
            addr=addr,
            version=kv.get("brokerVersionDesc", ""),
            in_tps=runtime_figure(kv.get("putTps")),
            out_tps=runtime_figure(kv.get("getTransferredTps") or kv.get("getTransferedTps")),
            page_cache_lock_ms=_as_int(kv.get("pageCacheLockTimeMills")),
            hours_of_data=round(hours, 2),
            disk_ratio=runtime_figure(kv.get("commitLogDiskRatio")),
            runtime_error=error,
            in_total_yesterday=total("msgPutTotalTodayMorning") - total("msgPutTotalYesterdayMorning"),
            out_total_yesterday=total("msgGetTotalTodayMorning") - total("msgGetTotalYesterdayMorning"),
            in_total_today=total("msgPutTotalTodayNow") - total("msgPutTotalTodayMorning"),
            out_total_today=total("msgGetTotalTodayNow") - total("msgGetTotalTodayMorning"),
            request_wait_ms=_as_int(kv.get("sendThreadPoolQueueHeadWaitTimeMills")),
        )

    # -- target resolution -------------------------------------------------------------------

    async def resolve_masters(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``-b`` wins over ``-c``; ``-c`` means every master of that cluster."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            addrs = (await self.cluster_info()).master_addrs(cluster)
            if not addrs:
                raise NotFoundError(f"cluster {cluster!r} has no master broker")
            return addrs
        raise MQAdminError("a broker address or a cluster name is required")

    async def resolve_all_addrs(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """Like ``resolve_masters`` but slaves included (read-only views of a cluster)."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            return (await self.cluster_info()).all_addrs(cluster)
        raise MQAdminError("a broker address or a cluster name is required")

    async def _broker(
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes | None = None
    ) -> _Reply:
        return await self._wire.call(addr, code, fields, body, role="broker")

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
        _check_topic_name(topic)
        fields = _create_topic_fields(topic, read_queue_nums, write_queue_nums, perm, order)
        (await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)).raise_unless_success()

    async def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete from the cluster's masters (or every broker of the route) and every name server.

        Returns the broker addresses the topic was deleted from.
        """
        addrs = (
            await self.resolve_masters(None, cluster)
            if cluster
            else (await self.topic_route(topic)).master_addrs()
        )
        for addr in addrs:
            (
                await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
            ).raise_unless_success()
        fields = {"topic": topic}
        if cluster:
            fields["clusterName"] = cluster
        for addr in self.namesrv_addrs:
            reply = await self._wire.call(
                addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, role="name server"
            )
            reply.raise_unless_success()
        return addrs

    async def topic_status(self, topic: str) -> TopicStatus:
        route = await self.topic_route(topic)
        queues: list[QueueOffsetStatus] = []
        for data in route.broker_datas:
            addr = data.master_addr
            if not addr:
                continue
            reply = await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            reply.raise_unless_success()
            for mq, offsets in _mq_table(reply.json().get("offsetTable")):
                queues.append(
                    QueueOffsetStatus(
                        broker_name=mq.get("brokerName", data.broker_name),
                        queue_id=int(mq.get("queueId", 0)),
                        min_offset=_as_int(offsets.get("minOffset")),
                        max_offset=_as_int(offsets.get("maxOffset")),
                        last_update_timestamp=_as_int(offsets.get("lastUpdateTimestamp")),
                    )
                )
        queues.sort(key=lambda q: (q.broker_name, q.queue_id))
        return TopicStatus(topic=topic, queues=queues)

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """Groups holding offsets for the topic on any of its brokers."""
        groups: set[str] = set()
        for addr in (await self.topic_route(topic)).master_addrs():
            reply = await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            reply.raise_unless_success()
            groups.update(reply.json().get("groupList") or [])
        return sorted(groups)

    # -- subscription groups -------------------------------------------------------------------

    async def create_or_update_subscription_group(
        self, addr: str, group: str, **options: Any
    ) -> dict[str, Any]:
        """Send a SubscriptionGroupConfig; ``options`` are its snake_case fields.

        Returns the config as sent (RocketMQ field names) so callers can show it.
        """
        config = _subscription_group_config(group, options)
        body = _to_json_bytes(config)
        (
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        ).raise_unless_success()
        return config

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        fields = {"groupName": group, "removeOffset": remove_offset}
        (await self._broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)).raise_unless_success()

    # -- consumers and producers ---------------------------------------------------------------

    async def _group_broker_addrs(self, group: str) -> list[str]:
        """Brokers that know a group: those of its retry topic, else every master."""
        try:
            addrs = (await self.topic_route(RETRY_GROUP_TOPIC_PREFIX + group)).master_addrs()
        except NotFoundError:
            addrs = []
        return addrs or (await self.cluster_info()).all_master_addrs()

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
        fields = {"consumerGroup": group}
        if topic:
            fields["topic"] = topic
        reply = await self._broker(addr, RequestCode.GET_CONSUME_STATS, fields)
        if reply.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
            return 0.0, []
        reply.raise_unless_success()
        stats = reply.json()
        rows = _progress_rows(stats.get("offsetTable"), broker_name or addr)
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
        except AdminRequestError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            return ConsumerGroupSummary(group, 0, None, "", "", tps, diff)
        version = max((c.version for c in conn.connections), default=None)
        return ConsumerGroupSummary(
            group, len(conn.connections), version, conn.consume_type, conn.message_model, tps, diff
        )

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        addrs = [broker_addr] if broker_addr else await self._group_broker_addrs(group)
        reply = await self._first_success(
            addrs, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
        )
        return _parse_consumer_connection(group, reply.json())

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        addrs = (await self.topic_route(topic)).master_addrs()
        reply = await self._first_success(
            addrs, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}
        )
        conns = _parse_connections(reply.json().get("connectionSet"))
        return ProducerConnection(group=group, connections=conns)

    async def _first_success(self, addrs: list[str], code: int, fields: dict[str, Any]) -> _Reply:
        """The first broker answering SUCCESS; the last refusal is raised if none does."""
        last: _Reply | None = None
        for addr in addrs:
            reply = await self._broker(addr, code, fields)
            if reply.code == ResponseCode.SUCCESS:
                return reply
            last = reply
        if last is None:
            raise NotFoundError("no broker to ask")
        last.raise_unless_success()
        raise AssertionError("unreachable")

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
        for data in route.broker_datas:
            addr = data.master_addr
            if not addr:
                continue
            fields = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
            reply = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            if reply.code == ResponseCode.CONSUMER_NOT_ONLINE:
                entries.extend(
                    await self._reset_offline(addr, data.broker_name, group, topic, timestamp, force)
                )
                continue
            reply.raise_unless_success()
            for mq, offset in _mq_table(reply.json().get("offsetTable") if reply.body else None):
                entries.append(
                    ResetOffsetEntry(
                        mq.get("brokerName", data.broker_name), int(mq.get("queueId", 0)), _as_int(offset)
                    )
                )
        entries.sort(key=lambda e: (e.broker_name, e.queue_id))
        return entries

    async def _reset_offline(
        self, addr: str, broker_name: str, group: str, topic: str, timestamp: int, force: bool
    ) -> list[ResetOffsetEntry]:
        reply = await self._broker(
            addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic}
        )
        reply.raise_unless_success()
        entries = []
        for mq, wrapper in _mq_table(reply.json().get("offsetTable")):
            queue_id = int(mq.get("queueId", 0))
            current = _as_int(wrapper.get("consumerOffset"))
            target = await self.search_offset(addr, topic, queue_id, timestamp)
            # Without force an offset only moves backwards, so nothing gets skipped unread.
            if force or target < current:
                await self.update_consumer_offset(addr, group, topic, queue_id, target)
            else:
                target = current
            entries.append(ResetOffsetEntry(broker_name, queue_id, target))
        return entries

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        fields = {"topic": topic, "queueId": queue_id, "timestamp": timestamp}
        reply = await self._broker(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)
        reply.raise_unless_success()
        return _as_int(reply.ext_fields.get("offset"))

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        (await self._broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields)).raise_unless_success()

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        reply = await self._broker(addr, RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
        reply.raise_unless_success()
        return _as_int(reply.ext_fields.get("offset"))

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        reply = await self._broker(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
        reply.raise_unless_success()
        return _as_int(reply.ext_fields.get("offset"))

    # -- messages ------------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offsetMsgId names: its store host answers VIEW_MESSAGE_BY_ID."""
        addr, commit_log_offset = _decode_offset_msg_id(offset_msg_id)
        reply = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": commit_log_offset})
        # RocketMQ's brokers (and ours) answer SYSTEM_ERROR with this remark for an offset that
        # holds no message: the message does not exist, the broker did not fail.
        not_found = NotFoundError(
            f"message {offset_msg_id} not found: no message at offset {commit_log_offset} of {addr}"
        )
        if reply.code == ResponseCode.SYSTEM_ERROR and (reply.remark or "").startswith(_NO_MESSAGE_AT_OFFSET):
            raise not_found
        reply.raise_unless_success()
        messages = _decode_messages(reply.body)
        if not messages:
            raise not_found
        return messages[0]

    async def view_cluster_message(self, offset_msg_id: str) -> MessageExt:
        """``view_message`` asked only of a broker the name servers list: an id naming another host
        is not found in this cluster, and nothing connects to the host it names."""
        addr, _ = _decode_offset_msg_id(offset_msg_id)
        if addr not in await self._known_broker_addrs():
            namesrv = ";".join(self.namesrv_addrs)
            raise NotFoundError(
                f"message {offset_msg_id} not found: it names store host {addr}, "
                f"which is no broker registered on name server {namesrv}"
            )
        return await self.view_message(offset_msg_id)

    async def query_message_by_id(self, topic: str, msg_id: str) -> list[MessageExt]:
        """A 32-hex id may be an offsetMsgId or a client msgId; try the first when it decodes to a
        broker this cluster knows, then fall back to the unique-key index, as RocketMQ does."""
        if _looks_like_offset_msg_id(msg_id):
            addr, _ = _decode_offset_msg_id(msg_id)
            if addr in await self._known_broker_addrs():
                try:
                    return [await self.view_message(msg_id)]
                except (AdminRequestError, NotFoundError):
                    pass
        found = await self.query_message_by_unique_key(topic, msg_id)
        if not found:
            raise NotFoundError(f"message {msg_id} not found in topic {topic!r}")
        return found

    async def _known_broker_addrs(self) -> set[str]:
        info = await self.cluster_info()
        return {addr for data in info.brokers.values() for addr in data.broker_addrs.values()}

    async def query_message_by_unique_key(
        self, topic: str, msg_id: str, max_num: int = 32
    ) -> list[MessageExt]:
        found = await self._query_index(topic, msg_id, 0, 2**63 - 1, max_num, unique=True)
        return [m for m in found if _unique_key_of(m) == msg_id]

    async def query_message_by_key(
        self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1, max_num: int = 64
    ) -> list[MessageExt]:
        found = await self._query_index(topic, key, begin, end, max_num, unique=False)
        # The index matches on key hashes; keep only real matches.
        return [m for m in found if key in _keys_of(m)][:max_num]

    async def _query_index(
        self, topic: str, key: str, begin: int, end: int, max_num: int, unique: bool
    ) -> list[MessageExt]:
        fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end}
        if unique:
            fields[UNIQUE_MSG_QUERY_FLAG] = "true"
        messages: list[MessageExt] = []
        for addr in (await self.topic_route(topic)).master_addrs():
            reply = await self._broker(addr, RequestCode.QUERY_MESSAGE, fields)
            if reply.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            reply.raise_unless_success()
            messages.extend(_decode_messages(reply.body))
        messages.sort(key=_store_timestamp_of)
        return messages

    async def pull_messages(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> PullResult:
        """One non-blocking pull of up to ``max_nums`` messages, committing nothing."""
        fields = _pull_fields(group, topic, queue_id, offset, max_nums)
        reply = await self._broker(addr, RequestCode.PULL_MESSAGE, fields)
        status = _PULL_STATUS.get(reply.code)
        if status is None:
            reply.raise_unless_success()
        messages = _decode_messages(reply.body) if status == "FOUND" else []
        ext = reply.ext_fields
        return PullResult(
            status=status or "FOUND",
            next_begin_offset=_as_int(ext.get("nextBeginOffset")),
            min_offset=_as_int(ext.get("minOffset")),
            max_offset=_as_int(ext.get("maxOffset")),
            messages=messages,
        )

    async def iter_queue_messages(
        self, addr: str, topic: str, queue_id: int, start: int, end: int, group: str = TOOLS_CONSUMER_GROUP
    ) -> AsyncIterator[MessageExt]:
        """Messages of one queue from ``start`` up to (not including) ``end``."""
        offset = start
        while offset < end:
            result = await self.pull_messages(addr, topic, queue_id, offset, min(32, end - offset), group)
            if result.status != "FOUND" or result.next_begin_offset <= offset:
                return
            for message in result.messages:
                if _queue_offset_of(message) < end:
                    yield message
            offset = result.next_begin_offset

    # -- brokers -------------------------------------------------------------------------------

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        reply = await self._broker(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        reply.raise_unless_success()
        table = reply.json().get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    async def broker_config(self, addr: str) -> dict[str, str]:
        return (await self.broker_config_state(addr)).values

    async def broker_config_state(self, addr: str) -> BrokerConfigState:
        """The values the broker runs with and those it accepted that wait for its restart
        (the ``pendingRestart`` field of GET_BROKER_CONFIG; none from brokers that send none)."""
        reply = await self._broker(addr, RequestCode.GET_BROKER_CONFIG)
        reply.raise_unless_success()
        try:
            pending = json.loads(reply.ext_fields.get("pendingRestart") or "{}")
        except ValueError:
            pending = {}
        pending = {str(k): str(v) for k, v in pending.items()} if isinstance(pending, dict) else {}
        return BrokerConfigState(_parse_properties(reply.body or b""), pending)

    async def update_broker_config(self, addr: str, properties: dict[str, str]) -> str:
        """Returns the broker's remark: which values apply now, which need a restart."""
        body = _format_properties(properties)
        reply = await self._broker(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        reply.raise_unless_success()
        return reply.remark or ""

    async def all_topic_configs(self, addr: str) -> dict[str, dict[str, Any]]:
        """The broker's topic table (GET_ALL_TOPIC_CONFIG): name → TopicConfig JSON (RocketMQ names)."""
        reply = await self._broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        reply.raise_unless_success()
        table = reply.json().get("topicConfigTable") or {}
        return {str(name): dict(config) for name, config in sorted(table.items())}

    async def all_subscription_groups(self, addr: str) -> dict[str, dict[str, Any]]:
        """The broker's group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): name → SubscriptionGroupConfig."""
        reply = await self._broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        reply.raise_unless_success()
        table = reply.json().get("subscriptionGroupTable") or {}
        return {str(name): dict(config) for name, config in sorted(table.items())}

    async def consumer_running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """One online consumer's ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO, relayed by a broker
        the client is connected to): its properties, subscriptions and the queues it holds."""
        fields = {"consumerGroup": group, "clientId": client_id, "jstackEnable": False}
        reply = await self._first_success(
            await self._group_broker_addrs(group), RequestCode.GET_CONSUMER_RUNNING_INFO, fields
        )
        return reply.json()

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Hand one stored message to one online consumer (CONSUME_MESSAGE_DIRECTLY through the
        message's store host) and return its ConsumeMessageDirectlyResult (consumeResult, remark,
        spentTimeMills). Nothing is committed: it is a redelivery to that client only."""
        addr, _ = _decode_offset_msg_id(offset_msg_id)
        fields: dict[str, Any] = {"consumerGroup": group, "clientId": client_id, "msgId": offset_msg_id}
        if topic:
            fields["topic"] = topic
        reply = await self._broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
        reply.raise_unless_success()
        return reply.json()

    # -- delayed messages and transactions (console W6/W7) ---------------------------------------

    async def delay_offsets(self, addr: str) -> dict[int, int]:
        """Delay progress per level (GET_ALL_DELAY_OFFSET): the schedule-topic offset each level's
        timer has delivered up to. RocketMQ answers with its ``delayOffset.json`` body."""
        reply = await self._broker(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        reply.raise_unless_success()
        table = (reply.json().get("offsetTable") or {}) if reply.body else {}
        return {int(level): _as_int(offset) for level, offset in table.items()}

    async def end_transaction(
        self,
        addr: str,
        producer_group: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        msg_id: str,
        commit: bool,
        transaction_id: str | None = None,
    ) -> None:
        """Commit or roll back a half message as an operator (END_TRANSACTION with
        fromTransactionCheck, as a producer answering a check does), addressed by the half
        message's queue offset and commit-log offset on broker ``addr``."""
        fields: dict[str, Any] = {
            "producerGroup": producer_group,
            "tranStateTableOffset": tran_state_table_offset,
            "commitLogOffset": commit_log_offset,
            "commitOrRollback": TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE,
            "fromTransactionCheck": True,
            "msgId": msg_id,
        }
        if transaction_id:
            fields["transactionId"] = transaction_id
        (await self._broker(addr, RequestCode.END_TRANSACTION, fields)).raise_unless_success()

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset of one queue, or -1 when it has none."""
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
        reply = await self._broker(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        reply.raise_unless_success()
        return _as_int(reply.ext_fields.get("offset"))


def _blocking(method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """The blocking twin of an ``AsyncMQAdmin`` coroutine method, run on the admin's loop thread."""

    @functools.wraps(method)
    def call(self: MQAdmin, *args: Any, **kwargs: Any) -> Any:
        return self._loop.run(method(self.core, *args, **kwargs))

    return call


class MQAdmin:
    """Blocking admin client: every ``AsyncMQAdmin`` method, same names, same results.

    The core runs on a private event-loop thread, so one MQAdmin may be shared by threads
    (a console serves several requests at once).
    """

    def __init__(self, namesrv_addr: str | Iterable[str], timeout: float = 3.0) -> None:
        self._loop = EventLoopThread("mqadmin")
        self.core = AsyncMQAdmin(namesrv_addr, timeout)
        self.namesrv_addrs = self.core.namesrv_addrs

    def close(self) -> None:
        try:
            self._loop.run(self.core.close(), timeout=10)
        finally:
            self._loop.stop()

    def __enter__(self) -> MQAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """Run a coroutine over ``self.core`` on the admin's loop thread and return its result: for
        callers that fan many requests out at once (``asyncio.gather``) instead of one by one."""
        return self._loop.run(coroutine, timeout=timeout)

    def iter_queue_messages(
        self, addr: str, topic: str, queue_id: int, start: int, end: int, group: str = TOOLS_CONSUMER_GROUP
    ) -> Iterator[MessageExt]:
        """Messages of one queue from ``start`` up to (not including) ``end``, pulled in batches."""
        offset = start
        while offset < end:
            result = self.pull_messages(addr, topic, queue_id, offset, min(32, end - offset), group)
            if result.status != "FOUND" or result.next_begin_offset <= offset:
                return
            yield from (m for m in result.messages if _queue_offset_of(m) < end)
            offset = result.next_begin_offset

    cluster_info = _blocking(AsyncMQAdmin.cluster_info)
    topic_list = _blocking(AsyncMQAdmin.topic_list)
    topic_route = _blocking(AsyncMQAdmin.topic_route)
    cluster_list = _blocking(AsyncMQAdmin.cluster_list)
    resolve_masters = _blocking(AsyncMQAdmin.resolve_masters)
    resolve_all_addrs = _blocking(AsyncMQAdmin.resolve_all_addrs)
    create_or_update_topic = _blocking(AsyncMQAdmin.create_or_update_topic)
    delete_topic = _blocking(AsyncMQAdmin.delete_topic)
    topic_status = _blocking(AsyncMQAdmin.topic_status)
    topic_consumed_by = _blocking(AsyncMQAdmin.topic_consumed_by)
    create_or_update_subscription_group = _blocking(AsyncMQAdmin.create_or_update_subscription_group)
    delete_subscription_group = _blocking(AsyncMQAdmin.delete_subscription_group)
    consumer_progress = _blocking(AsyncMQAdmin.consumer_progress)
    broker_consume_stats = _blocking(AsyncMQAdmin.broker_consume_stats)
    consumer_groups_progress = _blocking(AsyncMQAdmin.consumer_groups_progress)
    consumer_connection = _blocking(AsyncMQAdmin.consumer_connection)
    producer_connection = _blocking(AsyncMQAdmin.producer_connection)
    reset_offset_by_time = _blocking(AsyncMQAdmin.reset_offset_by_time)
    search_offset = _blocking(AsyncMQAdmin.search_offset)
    update_consumer_offset = _blocking(AsyncMQAdmin.update_consumer_offset)
    min_offset = _blocking(AsyncMQAdmin.min_offset)
    max_offset = _blocking(AsyncMQAdmin.max_offset)
    view_message = _blocking(AsyncMQAdmin.view_message)
    view_cluster_message = _blocking(AsyncMQAdmin.view_cluster_message)
    query_message_by_id = _blocking(AsyncMQAdmin.query_message_by_id)
    query_message_by_unique_key = _blocking(AsyncMQAdmin.query_message_by_unique_key)
    query_message_by_key = _blocking(AsyncMQAdmin.query_message_by_key)
    pull_messages = _blocking(AsyncMQAdmin.pull_messages)
    broker_runtime_info = _blocking(AsyncMQAdmin.broker_runtime_info)
    broker_config = _blocking(AsyncMQAdmin.broker_config)
    update_broker_config = _blocking(AsyncMQAdmin.update_broker_config)
    broker_config_state = _blocking(AsyncMQAdmin.broker_config_state)
    delay_offsets = _blocking(AsyncMQAdmin.delay_offsets)
    end_transaction = _blocking(AsyncMQAdmin.end_transaction)
    query_consumer_offset = _blocking(AsyncMQAdmin.query_consumer_offset)
    all_topic_configs = _blocking(AsyncMQAdmin.all_topic_configs)
    all_subscription_groups = _blocking(AsyncMQAdmin.all_subscription_groups)
    consume_message_directly = _blocking(AsyncMQAdmin.consume_message_directly)
    consumer_running_info = _blocking(AsyncMQAdmin.consumer_running_info)


def _progress_rows(table: Any, broker_name: str) -> list[QueueConsumeProgress]:
    rows = []
    for mq, wrapper in _mq_table(table):
        broker_offset = _as_int(wrapper.get("brokerOffset"))
        consumer_offset = _as_int(wrapper.get("consumerOffset"))
        rows.append(
            QueueConsumeProgress(
                topic=mq.get("topic", ""),
                broker_name=mq.get("brokerName", broker_name),
                queue_id=int(mq.get("queueId", 0)),
                broker_offset=broker_offset,
                consumer_offset=consumer_offset,
                diff=max(broker_offset - consumer_offset, 0),
                last_timestamp=_as_int(wrapper.get("lastTimestamp")),
            )
        )
    return rows


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def runtime_figure(value: Any) -> float:
    """RocketMQ runtime figures like putTps are ``"12.5 11.0 10.2"`` (10 s, 1 min, 10 min)."""
    if value is None:
        return 0.0
    try:
        return float(str(value).split()[0])
    except (IndexError, ValueError):
        return 0.0


# ---------------------------------------------------------------------------------------------
# Wire: one request to one server, and the bodies RocketMQ's admin codes carry
# ---------------------------------------------------------------------------------------------

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_FLAG_SUBSCRIPTION = 0x4  # RocketMQ PullSysFlag: 0x1 commit, 0x2 suspend, 0x4 subscription
_PULL_STATUS = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}
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


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN_CODE"


@dataclass
class BrokerConfigState:
    values: dict[str, str]  # what the broker runs with
    pending: dict[str, str]  # accepted, used after the broker's restart


@dataclass
class _Reply:
    role: str
    addr: str
    code: int
    remark: str | None
    ext_fields: dict[str, str]
    body: bytes | None

    def raise_unless_success(self) -> None:
        if self.code != ResponseCode.SUCCESS:
            raise AdminRequestError(self.role, self.addr, self.code, self.remark)

    def json(self) -> dict[str, Any]:
        """The body as RocketMQ's JSON (fastjson dialect: object keys allowed); {} when empty."""
        if not self.body:
            return {}
        try:
            value = fastjson.loads(self.body)
        except ValueError as exc:
            raise MQAdminError(f"{self.role} {self.addr} sent an unreadable body ({exc})") from None
        return value if isinstance(value, dict) else {}


def _ext_value(value: Any) -> str:
    # Java's header decoding reads booleans as "true"/"false", never Python's "True".
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_broker_data(raw: dict[str, Any]) -> BrokerData:
    addrs = {int(k): str(v) for k, v in (raw.get("brokerAddrs") or {}).items()}
    return BrokerData(
        cluster=str(raw.get("cluster", "")), broker_name=str(raw.get("brokerName", "")), broker_addrs=addrs
    )


def _parse_cluster_info(raw: dict[str, Any]) -> ClusterInfo:
    table = raw.get("brokerAddrTable") or {}
    brokers = {str(name): _parse_broker_data(data) for name, data in table.items()}
    clusters = {
        str(name): sorted(str(b) for b in members)
        for name, members in (raw.get("clusterAddrTable") or {}).items()
    }
    return ClusterInfo(brokers=brokers, clusters=clusters)


def _parse_topic_route(topic: str, raw: dict[str, Any]) -> TopicRoute:
    queues = [
        QueueData(
            broker_name=str(q.get("brokerName", "")),
            read_queue_nums=_as_int(q.get("readQueueNums")),
            write_queue_nums=_as_int(q.get("writeQueueNums")),
            perm=_as_int(q.get("perm")),
            topic_sys_flag=_as_int(q.get("topicSysFlag")),
        )
        for q in raw.get("queueDatas") or []
    ]
    brokers = [_parse_broker_data(b) for b in raw.get("brokerDatas") or []]
    queues.sort(key=lambda q: q.broker_name)
    brokers.sort(key=lambda b: b.broker_name)
    return TopicRoute(
        topic=topic, queue_datas=queues, broker_datas=brokers, order_topic_conf=raw.get("orderTopicConf")
    )


def _parse_connections(raw: Any) -> list[ClientConnection]:
    conns = [
        ClientConnection(
            client_id=str(c.get("clientId", "")),
            client_addr=str(c.get("clientAddr", "")),
            language=str(c.get("language", "")),
            version=_as_int(c.get("version")),
        )
        for c in raw or []
    ]
    return sorted(conns, key=lambda c: c.client_id)


def _parse_consumer_connection(group: str, raw: dict[str, Any]) -> ConsumerConnection:
    subs = [
        Subscription(
            topic=str(topic),
            sub_string=str(data.get("subString", "*")),
            expression_type=str(data.get("expressionType") or "TAG"),
        )
        for topic, data in sorted((raw.get("subscriptionTable") or {}).items())
    ]
    return ConsumerConnection(
        group=group,
        connections=_parse_connections(raw.get("connectionSet")),
        subscriptions=subs,
        consume_type=str(raw.get("consumeType", "")),
        message_model=str(raw.get("messageModel", "")),
        consume_from_where=str(raw.get("consumeFromWhere", "")),
    )


def _mq_table(table: Any) -> list[tuple[dict[str, Any], Any]]:
    """Entries of a fastjson map keyed by MessageQueue objects, as (queue fields, value)."""
    if not table:
        return []
    items = table.items() if isinstance(table, dict) else table
    return [(_mq_fields(key), value) for key, value in items]


def _mq_fields(key: Any) -> dict[str, Any]:
    if isinstance(key, dict):
        return key
    if isinstance(key, tuple | frozenset):
        return dict(key)
    if isinstance(key, str):
        parsed = fastjson.loads(key.encode("utf-8"))
        return parsed if isinstance(parsed, dict) else {}
    return {
        "topic": getattr(key, "topic", ""),
        "brokerName": getattr(key, "broker_name", ""),
        "queueId": getattr(key, "queue_id", 0),
    }


def _create_topic_fields(
    topic: str, read_queue_nums: int, write_queue_nums: int, perm: int, order: bool
) -> dict[str, Any]:
    return {
        "topic": topic,
        "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
        "readQueueNums": read_queue_nums,
        "writeQueueNums": write_queue_nums,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": order,
    }


def _subscription_group_config(group: str, options: dict[str, Any]) -> dict[str, Any]:
    """RocketMQ's SubscriptionGroupConfig JSON from snake_case options over its defaults."""
    config: dict[str, Any] = {"groupName": group, **_SUBSCRIPTION_GROUP_DEFAULTS}
    for name, value in options.items():
        if value is None:
            continue
        camel = _camel(name)
        if camel not in config:
            raise MQAdminError(f"unknown subscription group option {name!r}")
        config[camel] = value
    return config


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _to_json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _pull_fields(group: str, topic: str, queue_id: int, offset: int, max_nums: int) -> dict[str, Any]:
    # Subscription flag set and "*" sent with it: the broker then needs no registered consumer
    # of the group to filter for us, and suspendTimeoutMillis 0 means no long polling.
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": max_nums,
        "sysFlag": _FLAG_SUBSCRIPTION,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
        "expressionType": "TAG",
    }


def _parse_properties(body: bytes) -> dict[str, str]:
    """Java ``key=value`` properties text (as GET_BROKER_CONFIG sends it) into a dict."""
    result: dict[str, str] = {}
    for line in body.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return dict(sorted(result.items()))


def _format_properties(properties: dict[str, str]) -> bytes:
    return "".join(f"{k}={v}\n" for k, v in properties.items()).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Transport: broker.remoting's blocking client, its failures turned into operator messages
# ---------------------------------------------------------------------------------------------


class _AdminWire:
    """Request/response to any address over one asyncio ``RemotingClient``."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._client = RemotingClient()

    async def call(
        self,
        addr: str,
        code: int,
        fields: dict[str, Any] | None = None,
        body: bytes | None = None,
        role: str = "broker",
    ) -> _Reply:
        request = create_request(code, fields, body or b"")
        try:
            raw = await self._client.invoke(addr, request, int(self.timeout * 1000))
        except RemotingError as exc:
            # A broken connection must not be reused by the next call to this address.
            self._client.close_connection(addr)
            error_type = NameServerUnreachableError if role == "name server" else BrokerUnreachableError
            raise error_type(addr, _describe_remoting_error(exc, self.timeout)) from None
        return _Reply(
            role=role,
            addr=addr,
            code=raw.code,
            remark=raw.remark,
            ext_fields=dict(raw.ext_fields),
            body=raw.body or None,
        )

    async def close(self) -> None:
        await self._client.close()


def _describe_remoting_error(exc: RemotingError, timeout: float) -> str:
    # broker.remoting raises its errors "from None"; the OS error is still the context.
    cause = exc.__context__
    if isinstance(exc, RemotingTimeoutError) or isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, socket.gaierror):
        return f"unknown host: {cause.strerror or cause}"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    text = str(exc)
    addr = getattr(exc, "addr", "")
    return text.split(f"{addr}: ", 1)[-1] if addr else text


def _decode_messages(body: bytes | None) -> list[MessageExt]:
    try:
        return decode_messages(body or b"", decompress_body=True)
    except MessageDecodeError as exc:
        raise MQAdminError(f"a broker sent messages that cannot be decoded ({exc})") from None


_NO_MESSAGE_AT_OFFSET = "can not find message by the offset"


def _looks_like_offset_msg_id(msg_id: str) -> bool:
    try:
        decode_offset_msg_id(msg_id)
    except MessageDecodeError:
        return False
    return True


def _decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId → (store host ``ip:port``, commit-log offset)."""
    try:
        (ip, port), offset = decode_offset_msg_id(msg_id)
    except MessageDecodeError as exc:
        raise MQAdminError(f"{msg_id!r} is not an offsetMsgId ({exc})") from None
    return f"{ip}:{port}", offset


def _unique_key_of(message: MessageExt) -> str | None:
    return message.unique_key


def _keys_of(message: MessageExt) -> list[str]:
    return message.keys


def _store_timestamp_of(message: MessageExt) -> int:
    return message.store_timestamp


def _queue_offset_of(message: MessageExt) -> int:
    return message.queue_offset


def _check_topic_name(topic: str) -> None:
    problem = validate_topic(topic)
    if problem:
        raise MQAdminError(f"invalid topic: {problem}")
