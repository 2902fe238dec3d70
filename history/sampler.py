"""One sampling cycle of one cluster: collect (``cluster_snapshot``, the collector /metrics uses),
turn the snapshot into figures of the catalogue, store them as one bulk insert, send
``sample_stored``.

A broker that does not answer is stored with ``up`` 0 and the seconds since it last answered; so is
a broker of the previous cycle that the name server no longer lists, or every broker of the
previous cycle when the name server itself does not answer (a dead cluster must not look like an
empty, quiet one). Figures the cycle cannot know are left out, not stored as zero: a topic's or a
broker's TPS on its first cycle (a rate is a counter's growth since the previous cycle), a group
whose stats failed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from broker.client.admin import MQAdmin, MQClientError
from core import clock
from core.cluster_queries import GroupRow
from core.cluster_snapshot import Snapshot, broker_figures, collect
from core.signals import sample_stored
from history import catalogue, query
from history.models import Cycle, Point, Series

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (metric, scope, name)
# The previous cycle's counters a rate is the growth of: {(metric, scope): {name: (taken_at, value)}}.
Previous = dict[tuple[str, str], dict[str, tuple[datetime, float]]]
RATED = (("messages", "topic"), ("messages_in", "broker"), ("messages_out", "broker"))
# A broker's rates are its counters' growth between two cycles: its own putTps is a 10 s window at
# the sampling moment and misses a burst between samples.
BROKER_RATES = {"tps_in": "messages_in", "tps_out": "messages_out"}
INSERT_BATCH = 1000
# A broker not heard from for this long, and no longer listed by the name server, is forgotten.
FORGET_AFTER = timedelta(days=1)


@dataclass
class CycleResult:
    cycle: Cycle
    figures: dict[Key, float]


def sample(cluster: str, admin: MQAdmin) -> CycleResult:
    """Sample ``cluster`` (a BROKER_NAMESRV entry) once through ``admin`` and store the figures."""
    taken_at = clock.now()
    # The counters' last values, from before a gap too (a broker down for a few cycles).
    previous = {key: query.last_known(*key, taken_at - FORGET_AFTER, cluster) for key in RATED}
    try:
        snapshot = admin.run(collect(admin.core))
    except MQClientError as exc:
        log.warning("history: cluster %s not sampled: %s", cluster, exc)
        figures = {}
        snapshot = Snapshot(taken_at.timestamp(), errors=[str(exc)])
    else:
        figures = figures_of(snapshot, taken_at, previous, cluster)
    _vanished(cluster, taken_at, figures)
    _without_partial_topics(figures)
    cycle = Cycle(
        cluster=cluster,
        taken_at=taken_at,
        seconds=round(snapshot.seconds, 3),
        requests=snapshot.requests,
        points=len(figures),
        errors=snapshot.errors[:50],
    )
    store(cycle, figures)
    return CycleResult(cycle, figures)


def figures_of(snapshot: Snapshot, taken_at: datetime, previous: Previous, cluster: str) -> dict[Key, float]:
    figures: dict[Key, float] = {}
    _brokers(snapshot, taken_at, cluster, figures, previous)
    _topics(snapshot, taken_at, previous[("messages", "topic")], figures)
    _groups(snapshot, taken_at, cluster, figures)
    for key in figures:
        catalogue.get(key[0], key[1])  # only catalogue metrics are stored
    return figures


def _brokers(
    snapshot: Snapshot, taken_at: datetime, cluster: str, figures: dict[Key, float], previous: Previous
) -> None:
    clusters: dict[str, dict[str, float]] = {}
    unrated: set[str] = set()  # clusters with a master of no rate this cycle
    for b in snapshot.brokers:
        name = catalogue.broker_key(b["broker"], b["broker_id"])
        totals = clusters.setdefault(
            b["cluster"],
            dict.fromkeys(
                ("brokers_up", "brokers_down", "tps_in", "tps_out", "messages_in", "messages_out"), 0.0
            ),
        )
        figures[("up", "broker", name)] = 1.0 if b["up"] else 0.0
        if not b["up"]:
            totals["brokers_down"] += 1
            heard = _last_heard_seconds(cluster, name, taken_at)
            if heard is not None:
                figures[("last_heard_seconds", "broker", name)] = heard
            continue
        totals["brokers_up"] += 1
        figures[("last_heard_seconds", "broker", name)] = 0.0
        for metric, value in broker_figures(b["runtime"]).items():
            if value is not None and metric not in BROKER_RATES:
                figures[(metric, "broker", name)] = value
        rated = _broker_rates(name, taken_at, previous, figures, _counted_seconds(b["runtime"]))
        if b["broker_id"] == "0":  # a slave's puts are its master's, counted once
            for metric in ("tps_in", "tps_out", "messages_in", "messages_out"):
                totals[metric] += figures.get((metric, "broker", name), 0.0)
            if not rated:
                unrated.add(b["cluster"])
            half = snapshot.half_messages.get(b["broker"])
            if half is not None:
                figures[("half_messages", "broker", name)] = float(half)
    _clusters(snapshot, clusters, unrated, figures)


def _clusters(
    snapshot: Snapshot, clusters: dict[str, dict[str, float]], unrated: set[str], figures: dict[Key, float]
) -> None:
    """Each RocketMQ cluster's figures: its masters' totals (no TPS when a master has none: a
    partial sum would read as a drop in traffic), half messages, non-system groups' lag."""
    broker_cluster = {b["broker"]: b["cluster"] for b in snapshot.brokers}
    for cluster_name, totals in clusters.items():
        for metric, value in totals.items():
            if cluster_name not in unrated or metric not in BROKER_RATES:
                figures[(metric, "cluster", cluster_name)] = round(value, 3)
        halves = [
            v for broker, v in snapshot.half_messages.items() if broker_cluster.get(broker) == cluster_name
        ]
        figures[("half_messages", "cluster", cluster_name)] = float(sum(halves))
        figures[("lag", "cluster", cluster_name)] = 0.0
    first_cluster = min(clusters) if clusters else None
    for g in snapshot.groups:
        if g.error or g.system or first_cluster is None:
            continue
        owner = next((broker_cluster[b] for b in g.brokers if b in broker_cluster), first_cluster)
        figures[("lag", "cluster", owner)] += g.lag


def _counted_seconds(runtime: dict[str, str]) -> float | None:
    """How long the broker's put and get totals have counted (they go on across restarts, from a
    totals file); None from a broker whose totals restart with it."""
    try:
        return float(runtime.get("msgTotalCountedSeconds", ""))
    except ValueError:
        return None


def _broker_rates(
    name: str, taken_at: datetime, previous: Previous, figures: dict[Key, float], counted_s: float | None
) -> bool:
    """The broker's TPS in and out: its counters' growth since the previous cycle over the seconds
    between. A counter that went down restarted from zero (a lost totals file; a broker without
    one): its value is the growth; unless it has counted for longer than the seconds between, when
    a kill lost the broker's last unsaved second: the previous figure stands until the counter
    passes it (those counts are lost, not the whole total counted again). False when the previous
    cycle has no counter of the broker (its first cycle, or it was down then and before)."""
    rated = True
    for rate, counter in BROKER_RATES.items():
        now = figures.get((counter, "broker", name))
        before = previous[(counter, "broker")].get(name)
        if now is None or before is None or taken_at <= before[0]:
            rated = False
            continue
        seconds = (taken_at - before[0]).total_seconds()
        grown = catalogue.counter_increase(before[1], now)
        if now < before[1] and counted_s is not None and counted_s >= seconds:
            grown, figures[(counter, "broker", name)] = 0.0, before[1]
        figures[(rate, "broker", name)] = round(grown / seconds, 3)
    return rated


def _last_heard_seconds(cluster: str, name: str, taken_at: datetime) -> float | None:
    """Seconds since the broker last answered a cycle; None when history never heard it."""
    heard = (
        Point.objects.filter(
            series__cluster=cluster, series__metric="up", series__scope="broker", series__name=name, value=1.0
        )
        .order_by("-taken_at")
        .values_list("taken_at", flat=True)
        .first()
    )
    return None if heard is None else max(0.0, (taken_at - heard).total_seconds())


def _topics(
    snapshot: Snapshot,
    taken_at: datetime,
    previous: dict[str, tuple[datetime, float]],
    figures: dict[Key, float],
) -> None:
    for topic, written in snapshot.topics.items():
        figures[("messages", "topic", topic)] = float(written)
        figures[("stored", "topic", topic)] = float(snapshot.topic_stored.get(topic, 0))
        before = previous.get(topic)
        if before is None:
            continue
        seconds = (taken_at - before[0]).total_seconds()
        # A count that went down (the topic was recreated, a broker's store replaced) gives no rate.
        if seconds > 0 and written >= before[1]:
            figures[("tps_in", "topic", topic)] = round((written - before[1]) / seconds, 3)


def _groups(snapshot: Snapshot, taken_at: datetime, cluster: str, figures: dict[Key, float]) -> None:
    # System groups (the brokers' own: tools, transaction checker, ...) are not kept: nobody
    # charts or alerts on them, and they would crowd the top-N lists.
    previous = query.latest("consumed", "group", cluster)
    for g in snapshot.groups:
        if g.error or g.system:
            continue
        figures[("lag", "group", g.name)] = float(g.lag)
        figures[("consumed", "group", g.name)] = float(g.consumed)
        figures[("consume_tps", "group", g.name)] = _consume_tps(g, taken_at, previous.get(g.name))
        figures[("clients", "group", g.name)] = float(g.clients)
        figures[("dlq_messages", "group", g.name)] = float(snapshot.dlq_messages(g.name))


def _consume_tps(group: GroupRow, taken_at: datetime, before: tuple[datetime, float] | None) -> float:
    """What the group's committed offsets advanced by since the previous cycle, per second (as a
    topic's TPS from its written counts): a slow consumer that commits is never at 0, however
    seldom it pulls. Without a previous figure, or with offsets moved back (a reset), the
    brokers' own consume TPS (their last minute of the same progress) stands in."""
    if before is not None:
        seconds = (taken_at - before[0]).total_seconds()
        if seconds > 0 and group.consumed >= before[1]:
            return round((group.consumed - before[1]) / seconds, 3)
    return float(group.consume_tps)


def _vanished(cluster: str, taken_at: datetime, figures: dict[Key, float]) -> None:
    """Brokers of the previous cycle missing from this one (the name server dropped them, or did
    not answer at all): stored as down, with the seconds since they last answered, until
    ``FORGET_AFTER`` without an answer (a broker taken away for good stops being reported)."""
    cluster_names = sorted(
        name for metric, scope, name in figures if (metric, scope) == ("brokers_down", "cluster")
    )
    for name in query.latest("up", "broker", cluster):
        if ("up", "broker", name) in figures:
            continue
        heard = _last_heard_seconds(cluster, name, taken_at)
        if heard is None or heard > FORGET_AFTER.total_seconds():
            continue
        figures[("up", "broker", name)] = 0.0
        figures[("last_heard_seconds", "broker", name)] = heard
        if cluster_names:
            figures[("brokers_down", "cluster", cluster_names[0])] += 1


def _without_partial_topics(figures: dict[Key, float]) -> None:
    """With a master down, a topic's written count sums only the queues of the masters up: it went
    down, and comes back up with everything the master ever wrote. Neither is stored; the first
    rate after the master's return spans the gap, from the count before it."""
    if not any(
        v == 0.0 for (m, s, n), v in figures.items() if (m, s) == ("up", "broker") and catalogue.is_master(n)
    ):
        return
    for key in [k for k in figures if k[1] == "topic" and k[0] in ("messages", "tps_in")]:
        del figures[key]


def _series_ids(cluster: str, keys: list[Key]) -> dict[Key, int]:
    known = {
        (metric, scope, name): sid
        for sid, metric, scope, name in Series.objects.filter(cluster=cluster).values_list(
            "id", "metric", "scope", "name"
        )
    }
    missing = [k for k in keys if k not in known]
    if missing:
        # ignore_conflicts: another worker sampling at the same moment may create them too.
        Series.objects.bulk_create(
            [Series(cluster=cluster, metric=m, scope=s, name=n) for m, s, n in missing],
            batch_size=INSERT_BATCH,
            ignore_conflicts=True,
        )
        names = {n for _, _, n in missing}
        for sid, metric, scope, name in Series.objects.filter(cluster=cluster, name__in=names).values_list(
            "id", "metric", "scope", "name"
        ):
            known[(metric, scope, name)] = sid
    return known


def store(cycle: Cycle, figures: dict[Key, float]) -> None:
    """The cycle and its points in one transaction; ``sample_stored`` once it is committed."""
    with transaction.atomic():
        ids = _series_ids(cycle.cluster, list(figures))
        cycle.save()
        Point.objects.bulk_create(
            [
                Point(series_id=ids[key], taken_at=cycle.taken_at, value=value)
                for key, value in figures.items()
            ],
            batch_size=INSERT_BATCH,
        )
        transaction.on_commit(lambda: _announce(cycle))


def _announce(cycle: Cycle) -> None:
    for receiver, outcome in sample_stored.send_robust(
        sender=Cycle, taken_at=cycle.taken_at, cluster=cycle.cluster
    ):
        if isinstance(outcome, Exception):
            log.error(
                "history: %s failed after the cycle of %s: %s",
                receiver,
                cycle.cluster,
                outcome,
                exc_info=outcome,
            )
