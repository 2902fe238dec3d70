"""W10: Prometheus figures of the cluster, collected from the brokers when scraped.

One collection (``core.cluster_snapshot``, shared with the metric-history sampler)
walks brokers (runtime info), topics (stored messages) and groups (lag, TPS, clients), and is reused for
``CONSOLE_METRICS_CACHE_SECONDS`` so several scrapers (or a short scrape interval) do not multiply
the load on the brokers.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from broker.client.admin import MQAdmin, MQClientError
from console.services.damaged_data import damaged_data
from core.cluster_snapshot import Snapshot, broker_figures, collect

__all__ = ["ClusterCollector", "Snapshot", "collector_for"]


class ClusterCollector:
    """A prometheus-client collector over one name server's cluster, with a short cache."""

    def __init__(self, admin: MQAdmin, cache_seconds: float) -> None:
        self.admin = admin
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None

    def snapshot(self) -> Snapshot:
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None or time.time() - snapshot.taken_at >= self.cache_seconds:
                try:
                    snapshot = self.admin.run(collect(self.admin.core))
                except MQClientError as exc:
                    snapshot = Snapshot(time.time(), errors=[str(exc)])
                self._snapshot = snapshot
            return snapshot

    def collect(self):
        snap = self.snapshot()
        labels = ["cluster", "broker", "broker_id", "addr"]
        up = GaugeMetricFamily(
            "rocketmq_broker_up",
            "1 when the broker answered the console's last collection, 0 when it did not",
            labels=labels,
        )
        put_tps = GaugeMetricFamily(
            "rocketmq_broker_put_tps",
            "Messages put per second (the broker's 10 s average, putTps)",
            labels=labels,
        )
        get_tps = GaugeMetricFamily(
            "rocketmq_broker_get_tps",
            "Messages read per second (the broker's 10 s average, getTransferredTps)",
            labels=labels,
        )
        put_total = CounterMetricFamily(
            "rocketmq_broker_put_messages", "Messages put since the broker started", labels=labels
        )
        get_total = CounterMetricFamily(
            "rocketmq_broker_get_messages", "Messages read since the broker started", labels=labels
        )
        disk = GaugeMetricFamily(
            "rocketmq_broker_commitlog_disk_ratio",
            "Used fraction (0-1) of the commit-log disk",
            labels=labels,
        )
        # A full disk (or a file that cannot be allocated) makes the store refuse writes.
        writable = GaugeMetricFamily(
            "rocketmq_broker_store_writable",
            "1 while the broker's store takes writes, 0 while it refuses them (e.g. its disk is full)",
            labels=labels,
        )
        # Master/slave replication (issue 22): what the furthest slave lacks, seen from the master
        # (haSlaveBehindBytes), or what a slave lacks of what its master said it has.
        replication_lag = GaugeMetricFamily(
            "rocketmq_broker_replication_lag_bytes",
            "Commit-log bytes not yet on the slave: a master's furthest slave, or a slave itself",
            labels=labels,
        )
        replication_lag_seconds = GaugeMetricFamily(
            "rocketmq_broker_replication_lag_seconds",
            "Age of the oldest message a master's furthest slave does not have yet, seconds",
            labels=labels,
        )
        request_wait = GaugeMetricFamily(
            "rocketmq_broker_request_wait_ms",
            "How long a request arriving now waits before the broker serves it (its loop's lag), ms",
            labels=labels,
        )
        # Damaged commit-log data the broker set aside (quarantined) rather than cut or deliver.
        damaged_ranges = GaugeMetricFamily(
            "rocketmq_broker_commitlog_damaged_ranges",
            "Quarantined (damaged, skipped on reads) commit-log ranges not yet purged by an operator",
            labels=labels,
        )
        damaged_bytes = GaugeMetricFamily(
            "rocketmq_broker_commitlog_damaged_bytes",
            "Bytes of the commit log in quarantined (damaged) ranges",
            labels=labels,
        )
        for b in snap.brokers:
            values = [b["cluster"], b["broker"], b["broker_id"], b["addr"]]
            up.add_metric(values, 1.0 if b["up"] else 0.0)
            if not b["up"]:
                continue
            figures = broker_figures(b["runtime"])
            # Families a broker reports no figure for (None) get no sample, not a made-up zero
            # (only the last three can be None: broker_figures reads the others as 0.0 when missing).
            for family, key in (
                (put_tps, "tps_in"),
                (get_tps, "tps_out"),
                (put_total, "messages_in"),
                (get_total, "messages_out"),
                (disk, "disk_ratio"),
                (request_wait, "request_wait_ms"),
                (writable, "store_writable"),
                (replication_lag, "replication_lag_bytes"),
                (replication_lag_seconds, "replication_lag_seconds"),
            ):
                if (figure := figures[key]) is not None:
                    family.add_metric(values, figure)
            if "commitLogDamagedRanges" in b["runtime"]:  # an older broker reports no such figure
                damaged = damaged_data(b["runtime"])
                damaged_ranges.add_metric(values, damaged.range_count)
                damaged_bytes.add_metric(values, damaged.byte_count)
        yield from (up, put_tps, get_tps, put_total, get_total, disk, writable)
        yield from (replication_lag, replication_lag_seconds, request_wait, damaged_ranges, damaged_bytes)

        stored = CounterMetricFamily(
            "rocketmq_topic_messages",
            "Messages written to the topic (sum of its queues' max offsets)",
            labels=["topic"],
        )
        for topic, total in sorted(snap.topics.items()):
            stored.add_metric([topic], total)
        yield stored

        lag = GaugeMetricFamily(
            "rocketmq_group_lag", "Messages not yet consumed by the group, all its topics", labels=["group"]
        )
        tps = GaugeMetricFamily(
            "rocketmq_group_consume_tps",
            "Messages the group consumes per second: its committed offsets' progress, last minute",
            labels=["group"],
        )
        clients = GaugeMetricFamily(
            "rocketmq_group_clients", "Online consumers of the group", labels=["group"]
        )
        # The group's dead-letter topic (%DLQ%<group>): what the DLQ alert rule watches grow.
        dead = GaugeMetricFamily(
            "rocketmq_group_dlq_messages", "Messages in the group's dead-letter topic now", labels=["group"]
        )
        for g in snap.groups:
            if g.error:
                continue
            lag.add_metric([g.name], g.lag)
            tps.add_metric([g.name], g.consume_tps)
            clients.add_metric([g.name], g.clients)
            dead.add_metric([g.name], snap.dlq_messages(g.name))
        yield from (lag, tps, clients, dead)

        half = GaugeMetricFamily(
            "rocketmq_broker_half_messages",
            "Transaction half messages the master's checker has not yet passed",
            labels=["cluster", "broker"],
        )
        cluster_of = {b["broker"]: b["cluster"] for b in snap.brokers}
        for broker_name, pending in sorted(snap.half_messages.items()):
            half.add_metric([cluster_of.get(broker_name, ""), broker_name], pending)
        yield half

        errors = GaugeMetricFamily(
            "rocketmq_console_collect_errors", "Admin requests that failed in the console's last collection"
        )
        errors.add_metric([], len(snap.errors))
        yield errors


_collectors: dict[str, ClusterCollector] = {}
_collectors_lock = threading.Lock()


def collector_for(admin: MQAdmin, namesrv: str) -> ClusterCollector:
    with _collectors_lock:
        collector = _collectors.get(namesrv)
        if collector is None or collector.admin is not admin:
            collector = _collectors[namesrv] = ClusterCollector(admin, settings.CONSOLE_METRICS_CACHE_SECONDS)
        # The setting as it is now, not as it was when the collector was made (the collector
        # outlives requests; a test or an operator may change it).
        collector.cache_seconds = settings.CONSOLE_METRICS_CACHE_SECONDS
        return collector
