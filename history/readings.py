"""The metric history read for one alert evaluation (``core.metric_history.MetricReadings``):
every read covers all subjects of a metric at once and is done once per evaluation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db.models import Max

from core import clock
from history import catalogue, query
from history.models import Cycle, Point, Series


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


class History:
    """The history app's answer to ``core.metric_history.MetricHistory``."""

    def latest(
        self, metric: str, scope: str, cluster: str | None = None
    ) -> dict[str, tuple[datetime, float]]:
        return query.latest(metric, scope, cluster)

    def growth_since(
        self,
        metric: str,
        scope: str,
        since: datetime,
        cluster: str | None = None,
        names: Iterable[str] | None = None,
    ) -> dict[str, float]:
        return query.growth_since(metric, scope, since, cluster, names)

    def is_master(self, key: str) -> bool:
        return catalogue.is_master(key)

    def readings(self, cluster: str, now: datetime) -> Readings:
        return Readings(cluster, now)
