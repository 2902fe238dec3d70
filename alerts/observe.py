"""How each kind of rule is measured on the metric history: one figure per subject (a group, a
broker) of one cluster at the evaluation's time.

Every read covers all subjects of a metric at once (the newest cycle, or every point of a window),
and a ``Readings`` object caches them for one evaluation, so the cost of a cycle grows with the
number of distinct metrics the enabled rules read, not with groups, rules or points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max, Min

from history import query
from history.models import Cycle, Point, Series

from .kinds import BROKER, GROUP, KINDS


@dataclass(frozen=True)
class Observation:
    subject: dict[str, str]  # {"cluster": ..., "group": ...} or {"cluster": ..., "broker": ...}
    value: float


class Readings:
    """History reads of one cluster at ``now``, each done once per evaluation."""

    def __init__(self, cluster: str, now: datetime) -> None:
        self.cluster, self.now = cluster, now
        self._cache: dict[tuple, object] = {}
        self.queries = 0

    def _cached(self, key: tuple, load: Callable[[], object]):
        if key not in self._cache:
            self._cache[key] = load()
            self.queries += 1
        return self._cache[key]

    def latest(self, metric: str, scope: str) -> dict[str, float]:
        def load() -> dict[str, float]:
            return {name: value for name, (_, value) in query.latest(metric, scope, self.cluster).items()}

        return self._cached(("latest", metric, scope), load)

    def change_over(self, metric: str, scope: str, minutes: int) -> dict[str, float]:
        """Each name's value in the newest cycle minus its value in the oldest cycle of the last
        ``minutes`` (raw points of those two cycles only; a name absent from either has none)."""

        def load() -> dict[str, float]:
            since = self.now - timedelta(minutes=minutes)
            cycles = Cycle.objects.filter(cluster=self.cluster, taken_at__gte=since, taken_at__lte=self.now)
            bounds = cycles.aggregate(first=Min("taken_at"), last=Max("taken_at"))
            if bounds["first"] is None or bounds["first"] == bounds["last"]:
                return {}
            ids = dict(
                Series.objects.filter(metric=metric, scope=scope, cluster=self.cluster).values_list(
                    "id", "name"
                )
            )
            points = Point.objects.filter(
                series_id__in=list(ids), taken_at__in=[bounds["first"], bounds["last"]]
            )
            first: dict[int, float] = {}
            last: dict[int, float] = {}
            for series_id, taken_at, value in points.values_list("series_id", "taken_at", "value"):
                (first if taken_at == bounds["first"] else last)[series_id] = value
            return {ids[sid]: last[sid] - first[sid] for sid in last if sid in first}

        return self._cached(("change", metric, scope, minutes), load)

    def arrivals_over(self, metric: str, scope: str, minutes: int) -> dict[str, float]:
        """Each name's growth seen by the cycles of the last ``minutes`` (``now`` back to, not
        including, ``now - minutes``): a point in the window adds what it grew by since the
        name's point before it, which may be older than the window or several cycles back when
        cycles in between lack the name. So growth counts from the first cycle that sees it until
        that cycle leaves the window, whatever the cycles missing around it. A fall (messages
        removed) adds nothing. A point whose predecessor is more than a window older has none."""

        def load() -> dict[str, float]:
            window = timedelta(minutes=minutes)
            since = self.now - window
            ids = dict(
                Series.objects.filter(metric=metric, scope=scope, cluster=self.cluster).values_list(
                    "id", "name"
                )
            )
            points = Point.objects.filter(
                series_id__in=list(ids), taken_at__gt=since - window, taken_at__lte=self.now
            ).order_by("series_id", "taken_at")
            grown: dict[str, float] = {}
            before: tuple[int, float] | None = None  # (series, value) of the previous point
            for series_id, taken_at, value in points.values_list("series_id", "taken_at", "value"):
                if taken_at > since:
                    rise = value - before[1] if before and before[0] == series_id else 0.0
                    grown[ids[series_id]] = grown.get(ids[series_id], 0.0) + max(0.0, rise)
                before = (series_id, value)
            return grown

        return self._cached(("arrivals", metric, scope, minutes), load)

    def seconds_since_up(self, horizon: timedelta) -> dict[str, float]:
        """Each broker member seen within ``horizon``: seconds since a cycle last found it up. A
        member that no cycle lists any more (the name server dropped it) still counts, as down."""

        def load() -> dict[str, float]:
            ids = dict(
                Series.objects.filter(metric="up", scope="broker", cluster=self.cluster).values_list(
                    "id", "name"
                )
            )
            recent = Point.objects.filter(series_id__in=list(ids), taken_at__gte=self.now - horizon)
            last_any = dict(
                recent.values("series_id").annotate(t=Max("taken_at")).values_list("series_id", "t")
            )
            last_up = dict(
                recent.filter(value__gte=1, taken_at__lte=self.now)
                .values("series_id")
                .annotate(t=Max("taken_at"))
                .values_list("series_id", "t")
            )
            out = {}
            for sid in last_any:
                heard = last_up.get(sid)
                out[ids[sid]] = (self.now - heard).total_seconds() if heard else horizon.total_seconds()
            return out

        return self._cached(("since_up", horizon), load)


def _latest_above(metric: str, scope: str):
    return lambda rule, readings: readings.latest(metric, scope)


def _stalled(rule, readings: Readings) -> dict[str, float]:
    # Lag is the figure compared; a group counts only while it consumes nothing (no figure: none).
    tps = readings.latest("consume_tps", "group")
    return {name: lag for name, lag in readings.latest("lag", "group").items() if tps.get(name, 0.0) <= 0}


# The broker-down rule looks back this far for members it knew: one forgotten longer ago is gone.
BROKER_MEMORY = timedelta(hours=24)

MEASURES: dict[str, Callable[[object, Readings], dict[str, float]]] = {
    "group_lag": _latest_above("lag", "group"),
    "lag_growing": lambda rule, r: r.change_over("lag", "group", rule.window_minutes),
    "dlq_receiving": lambda rule, r: r.arrivals_over("dlq_messages", "group", rule.window_minutes),
    "consume_stalled": _stalled,
    "broker_down": lambda rule, r: r.seconds_since_up(BROKER_MEMORY),
    "disk_ratio": _latest_above("disk_ratio", "broker"),
    "replication_bytes": _latest_above("replication_lag_bytes", "broker"),
    "replication_seconds": _latest_above("replication_lag_seconds", "broker"),
    "request_wait": _latest_above("request_wait_ms", "broker"),
    "half_messages": _latest_above("half_messages", "broker"),
}
assert set(MEASURES) == set(KINDS), "every kind of rule needs a measure"


def observe(rule, readings: Readings) -> list[Observation]:
    """The rule's figure for every subject of the cluster in its scope."""
    scope_name = {GROUP: "group", BROKER: "broker"}[KINDS[rule.kind].subject]
    out = []
    for name, value in MEASURES[rule.kind](rule, readings).items():
        subject = {"cluster": readings.cluster, scope_name: name}
        if rule.covers(subject):
            out.append(Observation(subject, value))
    return out
