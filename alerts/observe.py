"""How each kind of rule is measured on the metric history: one figure per subject (a group, a
broker) of one cluster at the evaluation's time.

A level kind (lag, disk, ...) compares the subject's figure in the newest cycle. A subject that
cycle lacks (its stats failed, its broker stopped answering, the cycle stored nothing) but whose
last figure is at most ``core.clock.STALE_CYCLES`` sampling intervals old is observed as unknown
(``None``): its event keeps its state, as the overview page takes such history for "now". A
subject with no figure that recent is not observed at all, so its event ends as "no data".

Every read covers all subjects of a metric at once (the last few cycles, or every point of a
window), and a ``Readings`` object caches them for one evaluation, so the cost of a cycle grows
with the number of distinct metrics the enabled rules read, not with groups, rules or points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import Max

from core import clock
from history.models import Cycle, Point, Series

from .kinds import BROKER, GROUP, KINDS

if TYPE_CHECKING:
    from .models import AlertRule


@dataclass(frozen=True)
class Observation:
    subject: dict[str, str]  # {"cluster": ..., "group": ...} or {"cluster": ..., "broker": ...}
    value: float | None  # None: no figure in the newest cycle, a recent one before (see the module)


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

    @property
    def stale_after(self) -> timedelta:
        """How old a subject's last figure may be for its event to keep its state."""
        return clock.stale_after()

    def newest_cycle(self) -> datetime | None:
        def load() -> datetime | None:
            cycles = Cycle.objects.filter(cluster=self.cluster, taken_at__lte=self.now)
            return cycles.order_by("-taken_at").values_list("taken_at", flat=True).first()

        return self._cached(("newest",), load)

    def level(self, metric: str, scope: str) -> dict[str, float | None]:
        """Each name's figure in the newest cycle; ``None`` for a name that cycle lacks whose
        last figure is at most ``stale_after`` old; a name without so recent a figure is absent.
        One read of at most ``STALE_CYCLES`` + 1 points a name."""

        def load() -> dict[str, float | None]:
            newest = self.newest_cycle()
            if newest is None:
                return {}
            ids = dict(
                Series.objects.filter(metric=metric, scope=scope, cluster=self.cluster).values_list(
                    "id", "name"
                )
            )
            points = Point.objects.filter(
                series_id__in=list(ids), taken_at__gte=self.now - self.stale_after, taken_at__lte=newest
            ).order_by("series_id", "taken_at")
            out: dict[str, float | None] = {}
            for series_id, taken_at, value in points.values_list("series_id", "taken_at", "value"):
                out[ids[series_id]] = value if taken_at == newest else None  # the newest point wins
            return out

        return self._cached(("level", metric, scope), load)

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


# The kinds compared on a subject's newest figure: (metric, scope) each reads.
LEVELS = {
    "group_lag": ("lag", "group"),
    "disk_ratio": ("disk_ratio", "broker"),
    "replication_bytes": ("replication_lag_bytes", "broker"),
    "replication_seconds": ("replication_lag_seconds", "broker"),
    "request_wait": ("request_wait_ms", "broker"),
    "half_messages": ("half_messages", "broker"),
}


def _level(metric: str, scope: str):
    return lambda rule, readings: readings.level(metric, scope)


def _stalled(rule, readings: Readings) -> dict[str, float | None]:
    # Lag is the figure compared; a group counts only while it consumes nothing (no TPS figure at
    # all: none). Either figure unknown this cycle makes the answer unknown.
    tps = readings.level("consume_tps", "group")
    out: dict[str, float | None] = {}
    for name, lag in readings.level("lag", "group").items():
        rate = tps.get(name, 0.0)
        if lag is None or rate is None:
            out[name] = None
        elif rate <= 0:
            out[name] = lag
    return out


# The broker-down rule looks back this far for members it knew: one forgotten longer ago is gone.
BROKER_MEMORY = timedelta(hours=24)


def no_data(rule: AlertRule, readings: Readings) -> str:
    """Why a firing event whose subject the rule no longer observes resolves: the subject's last
    figure is older than what the rule's measure reads back."""
    if rule.kind == "broker_down":
        horizon = BROKER_MEMORY
    elif KINDS[rule.kind].uses_window:
        horizon = timedelta(minutes=rule.window_minutes)
    else:
        horizon = readings.stale_after
    seconds = int(horizon.total_seconds())
    span = (
        f"{seconds} s"
        if seconds < 120
        else f"{seconds // 60} min"
        if seconds < 7200
        else f"{seconds // 3600} h"
    )
    return f"no data: no figure for over {span}"


MEASURES: dict[str, Callable[[AlertRule, Readings], Mapping[str, float | None]]] = {
    **{kind: _level(metric, scope) for kind, (metric, scope) in LEVELS.items()},
    "lag_growing": lambda rule, r: r.change_over("lag", "group", rule.window_minutes),
    "dlq_receiving": lambda rule, r: r.change_over(
        "dlq_messages", "group", rule.window_minutes, rises_only=True
    ),
    "consume_stalled": _stalled,
    "broker_down": lambda rule, r: r.seconds_since_up(BROKER_MEMORY),
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
