"""The overview page's read model: cluster health at a glance, each section on its own.

Brokers come from one runtime-info request per broker (cheap, and the page must say *now* whether a
broker is up). The groups with most lag and the dead letters of today come from the metric history
(``core.metric_history``, kept by the history app) once the sampler has stored points, since
reading every group's lag live costs a consume-stats request per group; until then they are read
live and the page says so. Messages in
and out today come from the history only: the brokers' own day counts restart with the broker.
These sections are the console's; the page also shows those other apps register
(``core.overview``: the alerts app's firing events).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from broker.client.admin import MQAdmin
from broker.common.system_names import is_system_group
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX
from console.services.dead_letters_today import dead_letters_since
from console.services.vanished_brokers import vanished_brokers
from core import clock, metric_history
from core import overview as core_overview
from core.cluster_queries import cluster_overview, group_rows
from core.overview import Section

TOP_GROUPS = 10
DISK_WARN, DISK_BAD = 0.75, 0.9


@dataclass
class BrokerHealth:
    rows: list = field(default_factory=list)  # BrokerSummary, one per broker member
    # Messages put and read by the masters since 00:00 UTC, from the metric history (None without a
    # recent sample).
    in_today: int | None = None
    out_today: int | None = None
    # Members the name server dropped that the history stores as down (vanished_brokers): a
    # stopped broker is one down, not one fewer (the only broker stopped reads 0 / 1, not 0 / 0).
    vanished: int = 0

    @property
    def up(self) -> int:
        return sum(1 for r in self.rows if not r.runtime_error)

    @property
    def total(self) -> int:
        return len(self.rows) + self.vanished

    @property
    def down(self) -> int:
        return self.total - self.up

    @property
    def in_tps(self) -> float:
        return round(sum(r.in_tps for r in self.rows if not r.runtime_error), 2)

    @property
    def out_tps(self) -> float:
        return round(sum(r.out_tps for r in self.rows if not r.runtime_error), 2)

    @property
    def max_disk(self) -> float | None:
        ratios = [r.disk_ratio for r in self.rows if not r.runtime_error]
        return max(ratios) if ratios else None

    @property
    def disk_level(self) -> str:
        worst = self.max_disk or 0.0
        return "bad" if worst >= DISK_BAD else "warn" if worst >= DISK_WARN else "ok"


@dataclass
class LaggingGroup:
    group: str
    lag: float
    consume_tps: float | None = None
    clients: int | None = None


@dataclass
class DeadLetters:
    group: str
    total: float  # in the dead-letter topic now
    today: float | None = None  # arrived since midnight (UTC); None without history


def broker_health(admin: MQAdmin, cluster: str) -> Section:
    rows = cluster_overview(admin).rows
    listed = {(r.broker_name, r.broker_id) for r in rows}
    health = BrokerHealth(rows, vanished=len(vanished_brokers(cluster, listed)))
    history = metric_history.registered()
    if history is not None and _fresh_history(cluster, "messages_in", "broker") is not None:
        for metric, attr in (("messages_in", "in_today"), ("messages_out", "out_today")):
            grown = history.growth_since(metric, "broker", clock.day_start(), cluster)
            setattr(health, attr, round(sum(v for n, v in grown.items() if history.is_master(n))))
    return Section(health, source="live")


def _fresh_history(
    cluster: str, metric: str, scope: str = "group"
) -> dict[str, tuple[datetime, float]] | None:
    """The history's ``latest`` of the metric when the sampler stored its newest cycle recently
    enough to stand for "now" (a few sampling intervals), else None (read live, or no history)."""
    history = metric_history.registered()
    latest = history.latest(metric, scope, cluster) if history is not None else None
    if not latest:
        return None
    newest = max(taken_at for taken_at, _ in latest.values())
    return latest if clock.now() - newest <= clock.stale_after() else None


def _sampled(latest: dict[str, tuple[datetime, float]]) -> str:
    newest = max(taken_at for taken_at, _ in latest.values())
    return f"history, sampled {int((clock.now() - newest).total_seconds())} s ago"


def lagging_groups(admin: MQAdmin, cluster: str) -> Section:
    lags = _fresh_history(cluster, "lag")
    history = metric_history.registered()
    if lags is not None and history is not None:
        tps = history.latest("consume_tps", "group", cluster)
        clients = history.latest("clients", "group", cluster)
        ranked = sorted(
            ((v, n) for n, (_, v) in lags.items() if v > 0 and not is_system_group(n)), reverse=True
        )
        ranked.sort(key=lambda item: (-item[0], item[1]))
        rows = [
            LaggingGroup(name, lag, tps.get(name, (None, None))[1], _int(clients.get(name, (None, None))[1]))
            for lag, name in ranked[:TOP_GROUPS]
        ]
        return Section(rows, source=_sampled(lags))
    live = [g for g in group_rows(admin) if not g.system and not g.error and g.lag > 0]
    live.sort(key=lambda g: (-g.lag, g.name))
    rows = [LaggingGroup(g.name, g.lag, g.consume_tps, g.clients) for g in live[:TOP_GROUPS]]
    return Section(rows, source="live (no recent history sample)")


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def dead_letters(admin: MQAdmin, cluster: str) -> Section:
    """Groups with dead letters: how many their DLQ holds (from the history once sampled, else
    live) and how many arrived since 00:00 UTC, always read from the brokers' stores (exact
    whenever the sampler ran)."""
    stored = _fresh_history(cluster, "dlq_messages")
    if stored is not None:
        totals = {group: total for group, (_, total) in stored.items() if total > 0}
        source = _sampled(stored) + "; new today from the brokers"
    else:
        totals = {}
        for topic in admin.topic_list():
            if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                status = admin.topic_status(topic)
                total = sum(q.max_offset - q.min_offset for q in status.queues)
                if total:
                    totals[topic[len(DLQ_GROUP_TOPIC_PREFIX) :]] = total
        source = "live"
    groups = sorted(totals, key=lambda g: (-totals[g], g))
    today = dead_letters_since(admin, groups, clock.day_start())
    rows = [DeadLetters(group, totals[group], today.get(group)) for group in groups]
    rows.sort(key=lambda r: (-(r.today or 0), -r.total, r.group))
    return Section(rows, source=source)


def register_sections() -> None:
    """The console's sections of the overview (``ConsoleConfig.ready``)."""
    core_overview.register("brokers", broker_health)
    core_overview.register("lagging", lagging_groups)
    core_overview.register("dead_letters", dead_letters)


def overview(admin: MQAdmin, cluster: str) -> dict[str, Section]:
    """Every section of the page for the name server ``cluster`` (a ``BROKER_NAMESRV`` entry, the
    history's cluster key): the console's and those other apps registered."""
    return core_overview.sections(admin, cluster)
