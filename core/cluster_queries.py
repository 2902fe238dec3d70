"""Read models of the console pages that need many admin requests: each fans its requests out
at once on the admin client's loop (``asyncio.gather``) rather than one after another, so a
cluster of 1,000 topics and 300 groups still answers a page in a fraction of a second."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.client.admin import (
    AsyncMQAdmin,
    BrokerSummary,
    ConsumeProgress,
    ConsumerConnection,
    MQAdmin,
    MQBrokerError,
    MQClientError,
    NotFoundError,
    QueueConsumeProgress,
)
from broker.client.admin.topics import broker_summary
from broker.common.codes import ResponseCode
from broker.common.message_queue import MessageQueue
from broker.common.route import TopicRouteData
from broker.common.system_names import is_system_group
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX, perm_to_string
from broker.common.topic_kinds import SYSTEM, cluster_system_topics, topic_kinds

# Enough parallel requests to hide round trips, few enough not to flood a broker's executor.
FAN_OUT_LIMIT = 32


@dataclass
class TopicRow:
    name: str
    kinds: list[str]
    brokers: list[str] = field(default_factory=list)
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: str = ""
    order: bool = False

    @property
    def system(self) -> bool:
        """The console offers no Send or Delete for it (and its views refuse both)."""
        return SYSTEM in self.kinds


@dataclass
class GroupRow:
    name: str
    system: bool
    clients: int = 0
    consume_type: str = ""
    message_model: str = ""
    consume_tps: float = 0.0
    lag: int = 0
    consumed: int = 0  # its committed offsets summed over every queue: grows as it consumes
    brokers: list[str] = field(default_factory=list)
    retry_max_times: int | None = None
    consume_enable: bool | None = None
    error: str = ""


async def fan_out(coroutines: list) -> list:
    """Run the coroutines concurrently, at most FAN_OUT_LIMIT at once; exceptions are returned, not raised."""
    gate = asyncio.Semaphore(FAN_OUT_LIMIT)

    async def one(coroutine):
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(c) for c in coroutines), return_exceptions=True)


def _masters(info) -> list[tuple[str, str]]:
    return sorted((b.broker_name, b.master_addr) for b in info.brokers.values() if b.master_addr)


# -- topics ------------------------------------------------------------------------------------


async def _topic_rows(core: AsyncMQAdmin) -> list[TopicRow]:
    info = await core.cluster_info()
    masters = _masters(info)
    names = await core.topic_list()
    tables = await fan_out([core.all_topic_configs(addr) for _, addr in masters])
    special = cluster_system_topics(frozenset(info.clusters), frozenset(info.brokers))
    rows: dict[str, TopicRow] = {}
    for (broker_name, _), table in zip(masters, tables, strict=True):
        if isinstance(table, BaseException):
            continue  # that broker is down: its topics still show from the name server's list
        for name, config in table.items():
            row = rows.setdefault(name, TopicRow(name, []))
            row.brokers.append(broker_name)
            row.read_queue_nums += int(config.get("readQueueNums") or 0)
            row.write_queue_nums += int(config.get("writeQueueNums") or 0)
            row.perm = perm_to_string(int(config.get("perm") or 0))
            row.order = row.order or bool(config.get("order"))
    for name in names:
        rows.setdefault(name, TopicRow(name, []))
    for row in rows.values():
        row.kinds = topic_kinds(row.name, row.order, special)
    return sorted(rows.values(), key=lambda r: r.name)


def topic_rows(admin: MQAdmin) -> list[TopicRow]:
    return admin.run(_topic_rows(admin.core))


def is_system_topic_of(admin: MQAdmin, topic: str) -> bool:
    """A topic of the brokers' own (TopicValidator's list, ``rmq_sys_``) or one named after a cluster
    or broker of this name server or a cluster's reply topic, as the topic list's "system" kind
    says."""
    info = admin.cluster_info()
    special = cluster_system_topics(frozenset(info.clusters), frozenset(info.brokers))
    return SYSTEM in topic_kinds(topic, False, special)


@dataclass
class TopicConsumer:
    group: str
    lag: int = 0
    consume_tps: float = 0.0
    consumed: int = 0
    error: str = ""


def consumed_messages(queues: Iterable[QueueConsumeProgress]) -> int:
    """A group's committed offsets summed, each no further than its queue's end: as Apache's lag,
    an offset committed past the end (a client may commit any number) counts as the end, so the
    sum, and the consume TPS read from its growth, never exceeds the messages that exist."""
    return sum(min(q.consumer_offset, q.broker_offset) for q in queues)


async def _topic_consumers(core: AsyncMQAdmin, topic: str) -> list[TopicConsumer]:
    groups = await core.topic_consumed_by(topic)
    progress = await fan_out([core.consumer_progress(g, topic) for g in groups])
    rows = []
    for group, result in zip(groups, progress, strict=True):
        if isinstance(result, NotFoundError):
            rows.append(TopicConsumer(group))
        elif isinstance(result, BaseException):
            rows.append(TopicConsumer(group, error=str(result)))
        else:
            consumed = consumed_messages(result.queues)
            rows.append(TopicConsumer(group, result.diff_total, result.consume_tps, consumed))
    return rows


def topic_consumers(admin: MQAdmin, topic: str) -> list[TopicConsumer]:
    return admin.run(_topic_consumers(admin.core, topic))


# -- consumer groups ---------------------------------------------------------------------------


async def _group_configs(core: AsyncMQAdmin) -> dict[str, dict[str, Any]]:
    """Group name → its config on each master that has it ({broker name: config})."""
    masters = _masters(await core.cluster_info())
    tables = await fan_out([core.all_subscription_groups(addr) for _, addr in masters])
    configs: dict[str, dict[str, Any]] = {}
    for (broker_name, _), table in zip(masters, tables, strict=True):
        if isinstance(table, BaseException):
            continue
        for name, config in table.items():
            configs.setdefault(name, {})[broker_name] = config
    return configs


async def _connection_or_none(
    core: AsyncMQAdmin, group: str, broker_addr: str | None = None
) -> ConsumerConnection | None:
    try:
        return await core.consumer_connection(group, broker_addr)
    except MQBrokerError as exc:
        if exc.code in (ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.SYSTEM_ERROR):
            return None
        raise


async def _group_row(
    core: AsyncMQAdmin, group: str, configs: dict[str, Any], masters: list[tuple[str, str]]
) -> GroupRow:
    """One group's summary in as few requests as possible: consume stats from each master that holds
    the group (every master when none does) and the connection list from one of them."""
    row = GroupRow(group, is_system_group(group), brokers=sorted(configs))
    if configs:
        first = next(iter(configs.values()))
        row.retry_max_times = first.get("retryMaxTimes")
        row.consume_enable = first.get("consumeEnable")
    targets = [(name, addr) for name, addr in masters if name in configs] or masters
    stats = [core.broker_consume_stats(addr, group, None, name) for name, addr in targets]
    results = await asyncio.gather(*stats, _connection_on(core, group, targets), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        row.error = str(failures[0])
        return row
    *per_broker, connection = [r for r in results if not isinstance(r, BaseException)]  # none failed
    row.consume_tps = round(sum(tps for tps, _ in per_broker), 2)
    row.lag = sum(q.diff for _, rows in per_broker for q in rows)
    row.consumed = consumed_messages(q for _, rows in per_broker for q in rows)
    if connection is not None:
        row.clients = len(connection.connections)
        row.consume_type, row.message_model = connection.consume_type, connection.message_model
    return row


async def _connection_on(core: AsyncMQAdmin, group: str, targets: list[tuple[str, str]]):
    if not targets:
        return None
    try:
        return await core.consumer_connection(group, targets[0][1])
    except MQBrokerError as exc:
        if exc.code in (ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.SYSTEM_ERROR):
            return None
        raise


@dataclass
class GroupIndex:
    """Every group the cluster knows (configured on a broker, or owning a retry topic), by name."""

    names: list[str]
    configs: dict[str, dict[str, Any]]
    masters: list[tuple[str, str]]


async def _group_index(core: AsyncMQAdmin) -> GroupIndex:
    masters = _masters(await core.cluster_info())
    configs, topics = await asyncio.gather(_group_configs(core), core.topic_list())
    names = set(configs)
    names.update(t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in topics if t.startswith(RETRY_GROUP_TOPIC_PREFIX))
    return GroupIndex(sorted(names), configs, masters)


async def _rows_of(core: AsyncMQAdmin, index: GroupIndex, names: list[str]) -> list[GroupRow]:
    rows = await fan_out([_group_row(core, g, index.configs.get(g, {}), index.masters) for g in names])
    return [
        r if isinstance(r, GroupRow) else GroupRow(g, is_system_group(g), error=str(r))
        for g, r in zip(names, rows, strict=True)
    ]


async def _group_rows(core: AsyncMQAdmin) -> list[GroupRow]:
    index = await _group_index(core)
    return await _rows_of(core, index, index.names)


def group_index(admin: MQAdmin) -> GroupIndex:
    return admin.run(_group_index(admin.core))


def group_rows(
    admin: MQAdmin, index: GroupIndex | None = None, names: list[str] | None = None
) -> list[GroupRow]:
    """Summaries (clients, lag, TPS, config) of ``names`` (default: every group of the index)."""

    async def rows() -> list[GroupRow]:
        known = index or await _group_index(admin.core)
        return await _rows_of(admin.core, known, known.names if names is None else names)

    return admin.run(rows())


@dataclass
class GroupDetail:
    name: str
    configs: dict[str, dict[str, Any]]
    progress: ConsumeProgress | None
    connection: ConsumerConnection | None
    queue_clients: dict[tuple[str, str, int], str]
    unreachable: dict[str, str] = field(default_factory=dict)  # broker set → why it did not answer

    @property
    def topics(self) -> list[str]:
        """Every topic of the group, the one to reset by default first: a topic its live consumers
        subscribe to, then one it has offsets on; retry topics (which every clustering consumer
        subscribes to as well) last."""
        subscribed = {s.topic for s in self.connection.subscriptions} if self.connection else set()
        topics = subscribed | ({q.topic for q in self.progress.queues} if self.progress else set())
        return sorted(topics, key=lambda t: (t.startswith(RETRY_GROUP_TOPIC_PREFIX), t not in subscribed, t))


def _queue_of(key: Any) -> tuple[str, str, int] | None:
    """A ConsumerRunningInfo mqTable key: a MessageQueue object (read as (name, value) pairs)."""
    if isinstance(key, tuple | frozenset):
        key = dict(key)
    if isinstance(key, dict):
        return str(key.get("topic", "")), str(key.get("brokerName", "")), int(key.get("queueId", 0))
    return None


async def _queue_clients(core: AsyncMQAdmin, group: str, connection: ConsumerConnection | None):
    """(topic, broker, queue) → the client id holding it, from each online client's running info."""
    if connection is None:
        return {}
    client_ids = [c.client_id for c in connection.connections]
    infos = await fan_out([core.consumer_running_info(group, cid) for cid in client_ids])
    holders: dict[tuple[str, str, int], str] = {}
    for client_id, info in zip(client_ids, infos, strict=True):
        if isinstance(info, BaseException):
            continue  # an old client without running info: its queues show no holder
        table = info.get("mqTable") or {}
        for key in table.keys() if isinstance(table, dict) else (k for k, _ in table):
            queue = _queue_of(key)
            if queue:
                holders[queue] = client_id
    return holders


async def _progress_by_set(
    core: AsyncMQAdmin, group: str, masters: list[tuple[str, str]], unreachable: dict[str, str]
) -> ConsumeProgress | None:
    """The group's progress on every master at once; a set that does not answer is noted in
    ``unreachable`` and left out (the SDK's consumer_progress asks the sets in turn and fails whole)."""
    answers = await fan_out([core.broker_consume_stats(addr, group, None, name) for name, addr in masters])
    queues, tps = [], 0.0
    for (name, _), answer in zip(masters, answers, strict=True):
        if isinstance(answer, MQClientError):
            unreachable[name] = str(answer)
        elif isinstance(answer, BaseException):
            raise answer  # a bug, not a broker's state
        else:
            tps += answer[0]
            queues.extend(answer[1])
    if not queues:
        return None
    queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return ConsumeProgress(group, queues, round(tps, 2), sum(q.diff for q in queues))


async def _connection_of_any(core: AsyncMQAdmin, group: str, masters: list[tuple[str, str]]):
    """The group's online clients from whichever master answers (each is told by every client)."""
    answers = await fan_out([_connection_or_none(core, group, addr) for _, addr in masters])
    for answer in answers:
        if isinstance(answer, ConsumerConnection):
            return answer
    for answer in answers:  # a refusal (no permission, say) is shown; a silent set is skipped
        if isinstance(answer, MQBrokerError) or (
            isinstance(answer, BaseException) and not isinstance(answer, MQClientError)
        ):
            raise answer
    return None


async def _group_detail(core: AsyncMQAdmin, group: str) -> GroupDetail:
    configs = (await _group_configs(core)).get(group, {})
    masters = _masters(await core.cluster_info())
    unreachable: dict[str, str] = {}
    progress, connection = await asyncio.gather(
        _progress_by_set(core, group, masters, unreachable), _connection_of_any(core, group, masters)
    )
    if not configs and progress is None and connection is None and not unreachable:
        raise NotFoundError(f"consumer group {group!r} is not configured on any broker and has no consumers")
    queue_clients = await _queue_clients(core, group, connection)
    return GroupDetail(group, configs, progress, connection, queue_clients, unreachable)


def group_detail(admin: MQAdmin, group: str) -> GroupDetail:
    return admin.run(_group_detail(admin.core, group))


# -- offset reset preview ----------------------------------------------------------------------


@dataclass
class ResetPreviewRow:
    broker_name: str
    queue_id: int
    current: int | None
    target: int
    min_offset: int
    max_offset: int

    @property
    def change(self) -> int | None:
        """Messages skipped (positive) or to be consumed again (negative)."""
        return None if self.current is None else self.target - self.current


async def _queue_target(core: AsyncMQAdmin, addr: str, topic: str, queue_id: int, timestamp: int):
    low, high = await asyncio.gather(
        core.min_offset(addr, topic, queue_id), core.max_offset(addr, topic, queue_id)
    )
    if timestamp == 0:
        target = low
    elif timestamp < 0:
        target = high
    else:
        target = await core.search_offset(addr, topic, queue_id, timestamp)
    return low, high, target


async def _reset_preview(core: AsyncMQAdmin, group: str, topic: str, timestamp: int) -> list[ResetPreviewRow]:
    route = await core.topic_route(topic)
    try:
        progress = await core.consumer_progress(group, topic)
        current = {(q.broker_name, q.queue_id): q.consumer_offset for q in progress.queues}
    except NotFoundError:
        current = {}
    queues = [(q.broker_name, addr, q.queue_id) for q, addr in readable_master_queues(route)]
    targets = await fan_out([_queue_target(core, addr, topic, qid, timestamp) for _, addr, qid in queues])
    rows = []
    for (broker_name, _, queue_id), found in zip(queues, targets, strict=True):
        if isinstance(found, BaseException):
            raise found
        low, high, target = found
        rows.append(
            ResetPreviewRow(broker_name, queue_id, current.get((broker_name, queue_id)), target, low, high)
        )
    return rows


def reset_preview(admin: MQAdmin, group: str, topic: str, timestamp: int) -> list[ResetPreviewRow]:
    """Per queue: the group's offset now and where a reset to ``timestamp`` (0 earliest, -1 latest)
    would put it; nothing is changed."""
    return admin.run(_reset_preview(admin.core, group, topic, timestamp))


# -- replication (issue 22): each broker set's master and slaves -------------------------------


def _figure(runtime: dict[str, str], key: str) -> int | None:
    """A replication figure of the runtime info; None when the broker does not report it or
    reports -1 (its word for "no connected peer to measure against")."""
    try:
        value = int(runtime[key])
    except (KeyError, ValueError):
        return None
    return value if value >= 0 else None


@dataclass
class ReplicaMember:
    """One broker of a broker set with the replication figures its runtime info reports."""

    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str = ""
    # A slave's lag in milliseconds, from its master's figures (a slave measures only bytes).
    behind_millis: int | None = None
    # True when behind_millis is the furthest slave's (several connected): this one's is at most that.
    behind_millis_is_bound: bool = False

    @property
    def role(self) -> str:
        """The broker's own brokerRole; the name server's id tells only master or slave."""
        return self.runtime.get("brokerRole") or ("master" if self.broker_id == 0 else "slave")

    @property
    def is_master(self) -> bool:
        return self.broker_id == 0

    @property
    def slave_count(self) -> int | None:
        return _figure(self.runtime, "haSlaveCount")

    @property
    def slaves_behind_bytes(self) -> int | None:
        return _figure(self.runtime, "haSlaveBehindBytes")

    @property
    def slaves_behind_millis(self) -> int | None:
        return _figure(self.runtime, "haSlaveBehindMillis")

    @property
    def ack_offsets(self) -> list[tuple[str, int]]:
        """What each connected slave confirmed holding (haSlaveAckOffsets, ``addr=offset;…``):
        the address is its replication connection's, not its broker address."""
        pairs = []
        for item in self.runtime.get("haSlaveAckOffsets", "").split(";"):
            addr, sep, offset = item.rpartition("=")
            if sep and addr and offset.isdigit():
                pairs.append((addr, int(offset)))
        return pairs

    @property
    def master_connected(self) -> bool | None:
        value = self.runtime.get("haMasterConnected")
        return None if value is None else value == "true"

    @property
    def behind_bytes(self) -> int | None:
        return _figure(self.runtime, "haBehindMasterBytes")

    @property
    def last_error(self) -> str:
        return self.runtime.get("haLastError", "")

    @property
    def sync_error(self) -> str:
        return self.runtime.get("slaveSyncError", "")

    @property
    def sync_timestamp(self) -> int:
        return _figure(self.runtime, "slaveSyncTimestamp") or 0


@dataclass
class BrokerSet:
    cluster: str
    name: str
    members: list[ReplicaMember]

    @property
    def master(self) -> ReplicaMember | None:
        return next((m for m in self.members if m.is_master), None)

    @property
    def slaves(self) -> list[ReplicaMember]:
        return [m for m in self.members if not m.is_master]


def _slave_lag_millis(master: ReplicaMember | None, slave: ReplicaMember) -> None:
    """Give ``slave`` its lag in time. A master reports the age of the oldest message its furthest
    slave lacks (haSlaveBehindMillis); a slave that lacks nothing is 0 behind; with one slave
    connected the master's figure is that slave's; with several, each is at most that far behind."""
    if not slave.master_connected:
        return
    if slave.behind_bytes == 0:
        slave.behind_millis = 0
        return
    if master is None or master.slaves_behind_millis is None:
        return
    slave.behind_millis = master.slaves_behind_millis
    slave.behind_millis_is_bound = (master.slave_count or 0) > 1


@dataclass
class ClusterOverview:
    """The cluster page: every broker's ``clusterList`` row and the broker sets' replication,
    both from one runtime-info answer per broker."""

    rows: list[BrokerSummary]
    broker_sets: list[BrokerSet]


async def _cluster_overview(core: AsyncMQAdmin) -> ClusterOverview:
    info = await core.cluster_info()
    members = [
        (name, data, ReplicaMember(broker_id, addr))
        for name in sorted(info.clusters)
        for data in info.brokers_of(name)
        for broker_id, addr in sorted(data.broker_addrs.items())
    ]
    # At once: a broker that does not answer costs the page one timeout, not one per broker.
    answers = await fan_out([core.broker_runtime_info(m.addr) for _, _, m in members])
    rows: list[BrokerSummary] = []
    sets: dict[tuple[str, str], BrokerSet] = {}
    for (cluster, data, member), answer in zip(members, answers, strict=True):
        if isinstance(answer, MQClientError):
            member.error = str(answer)
        elif isinstance(answer, BaseException):
            raise answer  # a bug, not a broker's state
        else:
            member.runtime = answer
        rows.append(broker_summary(cluster, data.broker_name, member.broker_id, member.addr,
                                   member.runtime, member.error or None))  # fmt: skip
        key = (cluster, data.broker_name)
        sets.setdefault(key, BrokerSet(cluster, data.broker_name, [])).members.append(member)
    for broker_set in sets.values():
        for slave in broker_set.slaves:
            _slave_lag_millis(broker_set.master, slave)
    return ClusterOverview(rows, list(sets.values()))


def cluster_overview(admin: MQAdmin) -> ClusterOverview:
    """Every broker the name server knows, grouped by cluster and by broker set, with the runtime
    figures of each asked all at once."""
    return admin.run(_cluster_overview(admin.core))


def readable_master_queues(route: TopicRouteData) -> list[tuple[MessageQueue, str]]:
    """Every readable queue of the route (``TopicRouteData.readable_queues``) whose broker has a
    master, with the master's address: the queues the console reads and resets."""
    found = []
    for queue in route.readable_queues():
        broker = route.broker(queue.broker_name)
        if broker is not None and broker.master_addr:
            found.append((queue, broker.master_addr))
    return found
