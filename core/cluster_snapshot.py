"""One collection of a cluster's figures, shared by /metrics (W10) and the metric-history sampler
(W16): brokers (runtime info, every member), topics (written and stored messages), groups (lag,
consume TPS, clients), transaction half messages. Requests are fanned out (``cluster_queries``);
a broker that does not answer is in the snapshot with ``up`` False, never left out.

``broker_figures`` is the one reading of a broker's runtime keys (which key means what, which
values mean "no figure"), so the Prometheus families and the stored history cannot disagree.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

from broker.client.admin import AsyncMQAdmin, TopicStatus, runtime_figure
from broker.common.system_names import TRANSACTION_CHECK_GROUP
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX, TRANS_HALF_TOPIC
from core.cluster_queries import GroupRow, _group_rows, _masters, _topic_rows, fan_out


@dataclass
class Snapshot:
    taken_at: float
    # {"cluster", "broker", "broker_id", "addr", "up", "runtime"} per broker member.
    brokers: list[dict] = field(default_factory=list)
    # Topic → messages written (sum of its queues' max offsets).
    topics: dict[str, int] = field(default_factory=dict)
    # Topic → messages held now (sum of max minus min offsets).
    topic_stored: dict[str, int] = field(default_factory=dict)
    groups: list[GroupRow] = field(default_factory=list)
    # Master broker name → half messages its transaction checker has not yet passed.
    half_messages: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # What the collection cost: requests sent (name servers and brokers) and wall time.
    requests: int = 0
    seconds: float = 0.0

    def dlq_messages(self, group: str) -> int:
        """Messages in the group's dead-letter topic now (0 when it has none)."""
        return self.topic_stored.get(DLQ_GROUP_TOPIC_PREFIX + group, 0)


def broker_figures(runtime: dict[str, str]) -> dict[str, float | None]:
    """A broker's runtime info as figures; None where the broker reports none (an older broker
    without ``storeWritable``; ``-1``: no slave connected or no replication frame yet)."""
    behind = runtime.get("haSlaveBehindBytes") or runtime.get("haBehindMasterBytes")
    behind_ms = runtime.get("haSlaveBehindMillis")
    writable = runtime.get("storeWritable")
    return {
        "tps_in": runtime_figure(runtime.get("putTps")),
        "tps_out": runtime_figure(runtime.get("getTransferredTps") or runtime.get("getTransferedTps")),
        "messages_in": runtime_figure(runtime.get("msgPutTotalTodayNow")),
        "messages_out": runtime_figure(runtime.get("msgGetTotalTodayNow")),
        "disk_ratio": runtime_figure(runtime.get("commitLogDiskRatio")),
        "store_writable": None if writable is None else (1.0 if writable == "true" else 0.0),
        "request_wait_ms": runtime_figure(runtime.get("sendThreadPoolQueueHeadWaitTimeMills")),
        "replication_lag_bytes": None if behind in (None, "-1") else runtime_figure(behind),
        "replication_lag_seconds": None if behind_ms in (None, "-1") else runtime_figure(behind_ms) / 1000,
    }


# -- request counting ------------------------------------------------------------------------------
# The admin client is shared with the console's pages; a context variable set by the collection
# (inherited by the tasks it fans out) counts its own requests only.
_request_count: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "cluster_snapshot_requests", default=None
)


def _count_requests(core: AsyncMQAdmin) -> None:
    """Wrap the client's one request method (once per client) so collections can count."""
    api = core.api
    if getattr(api, "_snapshot_counting", False):
        return
    invoke = api.invoke

    async def counted(*args: Any, **kwargs: Any):
        counter = _request_count.get()
        if counter is not None:
            counter[0] += 1
        return await invoke(*args, **kwargs)

    api.invoke = counted  # type: ignore[method-assign]
    api._snapshot_counting = True  # type: ignore[attr-defined]


# -- the collection -------------------------------------------------------------------------------


async def _brokers(core: AsyncMQAdmin, snapshot: Snapshot) -> None:
    info = await core.cluster_info()
    addrs = [
        (cluster, name, broker_id, addr)
        for cluster, names in sorted(info.clusters.items())
        for name in names
        if name in info.brokers
        for broker_id, addr in sorted(info.brokers[name].broker_addrs.items())
    ]
    runtimes = await fan_out([core.broker_runtime_info(addr) for *_, addr in addrs])
    for (cluster, name, broker_id, addr), runtime in zip(addrs, runtimes, strict=True):
        up = not isinstance(runtime, BaseException)
        if not up:
            snapshot.errors.append(str(runtime))
        snapshot.brokers.append(
            {
                "cluster": cluster,
                "broker": name,
                "broker_id": str(broker_id),
                "addr": addr,
                "up": up,
                "runtime": runtime if up else {},
            }
        )


async def _topics(core: AsyncMQAdmin, snapshot: Snapshot) -> None:
    """Each topic's queue offsets, asked of the masters whose topic tables hold it (no route
    lookup per topic). When a master does not give its table, a topic's figures could miss that
    broker's share (and a later full count look like a burst of traffic): then each topic is
    asked by its route instead, and a topic with a silent broker has no figures this cycle."""
    masters = _masters(await core.cluster_info())
    tables = await fan_out([core.all_topic_configs(addr) for _, addr in masters])
    queues_of: dict[str, Any]  # topic → TopicStatus, or the error that voids its figures
    if any(isinstance(t, BaseException) for t in tables):
        topics = [t.name for t in await _topic_rows(core)]
        statuses = await fan_out([core.topic_status(t) for t in topics])
        queues_of = dict(zip(topics, statuses, strict=True))
    else:
        holders: dict[str, list[tuple[str, str]]] = {}
        for (name, addr), table in zip(masters, tables, strict=True):
            for topic in table:
                holders.setdefault(topic, []).append((name, addr))
        pairs = [(topic, name, addr) for topic, where in sorted(holders.items()) for name, addr in where]
        answers = await fan_out([core.topic_queue_offsets(addr, name, topic) for topic, name, addr in pairs])
        queues_of = {}
        for (topic, _, _), answer in zip(pairs, answers, strict=True):
            known = queues_of.get(topic)
            if isinstance(known, BaseException):
                continue  # one broker's failure already voids the topic's figures
            if isinstance(answer, BaseException):
                queues_of[topic] = answer
            else:
                queues_of.setdefault(topic, TopicStatus(topic, [])).queues.extend(answer)
    for topic, status in queues_of.items():
        if isinstance(status, BaseException):
            snapshot.errors.append(str(status))
            continue
        snapshot.topics[topic] = sum(q.max_offset for q in status.queues)
        snapshot.topic_stored[topic] = sum(max(0, q.max_offset - q.min_offset) for q in status.queues)
        if topic == TRANS_HALF_TOPIC:
            await _half_messages(core, snapshot, status)


async def _half_messages(core: AsyncMQAdmin, snapshot: Snapshot, status) -> None:
    """Per master: half messages at or after its transaction checker's position (the checker's
    committed offset on the half topic; the queue's start when it has none)."""
    masters = {b["broker"]: b["addr"] for b in snapshot.brokers if b["broker_id"] == "0" and b["up"]}
    queues = [q for q in status.queues if q.broker_name in masters]
    checked = await fan_out(
        [
            core.query_consumer_offset(
                masters[q.broker_name], TRANSACTION_CHECK_GROUP, TRANS_HALF_TOPIC, q.queue_id
            )
            for q in queues
        ]
    )
    for queue, offset in zip(queues, checked, strict=True):
        if isinstance(offset, BaseException):
            snapshot.errors.append(str(offset))
            continue
        start = max(queue.min_offset, offset)
        pending = max(0, queue.max_offset - start)
        snapshot.half_messages[queue.broker_name] = snapshot.half_messages.get(queue.broker_name, 0) + pending


async def collect(core: AsyncMQAdmin) -> Snapshot:
    """Walk the cluster once. A name server that does not answer raises (``MQClientError``);
    brokers, topics and groups that fail are recorded in ``errors`` (and brokers as down)."""
    _count_requests(core)
    counter = [0]
    _request_count.set(counter)
    started = time.perf_counter()
    snapshot = Snapshot(time.time())
    try:
        await _brokers(core, snapshot)
        await _topics(core, snapshot)
        snapshot.groups = await _group_rows(core)
    finally:
        snapshot.requests = counter[0]
        snapshot.seconds = time.perf_counter() - started
    return snapshot
