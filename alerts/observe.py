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
from typing import TYPE_CHECKING

from django.db.models import Max

from history import query
from history.models import Point, Series

from .kinds import BROKER, GROUP, KINDS

if TYPE_CHECKING:
    from .models import AlertRule


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

    def change_over(
        self, metric: str, scope: str, minutes: int, rises_only: bool = False
    ) -> dict[str, float]:
        """Each name's change seen by the cycles of the last ``minutes`` (``now`` back to, not
        including, ``now - minutes``): a point in the window adds what the name moved by since its
        point before it, which may be older than the window or several cycles back when cycles in
        between lack the name. So a change counts from the first cycle that sees it until that
        cycle leaves the window, whatever cycles are missing around it, and the sum is the name's
        last value in the window minus its last value before the window. With ``rises_only`` a
        fall adds nothing: dead letters that retention removed do not hide new ones. A point whose
        predecessor is more than a window older, or that has none, adds nothing."""

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
            moved: dict[str, float] = {}
            before: tuple[int, float] | None = None  # (series, value) of the previous point
            for series_id, taken_at, value in points.values_list("series_id", "taken_at", "value"):
                if taken_at > since:
                    step = value - before[1] if before and before[0] == series_id else 0.0
                    name = ids[series_id]
                    moved[name] = moved.get(name, 0.0) + (max(0.0, step) if rises_only else step)
                before = (series_id, value)
            return moved

        return self._cached(("change", metric, scope, minutes, rises_only), load)

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

MEASURES: dict[str, Callable[[AlertRule, Readings], dict[str, float]]] = {
    "group_lag": _latest_above("lag", "group"),
    "lag_growing": lambda rule, r: r.change_over("lag", "group", rule.window_minutes),
    "dlq_receiving": lambda rule, r: r.change_over(
        "dlq_messages", "group", rule.window_minutes, rises_only=True
    ),
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
