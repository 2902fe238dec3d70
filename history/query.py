"""Reading metric history back: series for charts, the latest cycle, top-N lists, daily totals.

Every function takes ``cluster`` = the BROKER_NAMESRV entry sampled; ``None`` means the first
configured entry (the cluster the console shows by default). Times are timezone-aware datetimes;
"now" is ``clock.now()``.

Resolution: a window of at most ``RAW_WINDOW`` (3 h) whose start is still within raw retention is
answered with raw points (one per sampling cycle: 120 for an hour at 30 s). Longer windows come from
the 5-minute rollups, merged into steps of a multiple of 5 minutes so the answer has about
``TARGET_POINTS`` points (a day: 288 five-minute points; a week: 288 thirty-five-minute points), with
the raw points newer than the last rollup appended in the same steps (the last minutes are not
missing from a day chart).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Avg, Count, Max, QuerySet, Sum
from django.utils import timezone

from core import clock
from core.cluster_access import namesrv_choices
from history import catalogue
from history.models import Cycle, Point, Rollup, Series

RAW_WINDOW = timedelta(hours=3)
ROLLUP_STEP = timedelta(minutes=5)
TARGET_POINTS = 300


def default_cluster() -> str:
    """The first configured name server: the cluster a call that names none reads."""
    return next(iter(namesrv_choices()), "")


def raw_horizon() -> datetime:
    """The oldest time raw points are kept for."""
    return clock.now() - timedelta(days=float(getattr(settings, "HISTORY_RAW_DAYS", 2)))


def _series_ids(
    metric: str, scope: str, cluster: str | None, names: Iterable[str] | None = None
) -> dict[int, str]:
    catalogue.get(metric, scope)  # an unknown metric is an error, not an empty chart
    qs = Series.objects.filter(metric=metric, scope=scope, cluster=cluster or default_cluster())
    if names is not None:
        qs = qs.filter(name__in=list(names))
    return dict(qs.values_list("id", "name"))


def names(metric: str, scope: str, cluster: str | None = None) -> list[str]:
    """The names the metric has a series for (stored at some time, not only in the newest cycle)."""
    return sorted(_series_ids(metric, scope, cluster).values())


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def step_for(window: timedelta) -> timedelta | None:
    """None for raw points, else the step (a multiple of 5 minutes) of a window's answer."""
    if window <= RAW_WINDOW:
        return None
    steps = math.ceil(window / TARGET_POINTS / ROLLUP_STEP)
    return ROLLUP_STEP * max(1, steps)


def series(
    metric: str,
    scope: str,
    name: str,
    since: datetime,
    until: datetime | None = None,
    cluster: str | None = None,
) -> list[tuple[datetime, float]]:
    """The points of one series in [since, until] (until: now), oldest first; raw or rolled up by
    the window (see the module's docstring). Rolled-up points carry their step's start and the
    count-weighted average of the step."""
    until = until or clock.now()
    ids = list(_series_ids(metric, scope, cluster, [name]))
    if not ids or until <= since:
        return []
    step = step_for(until - since)
    if step is None and since >= raw_horizon():
        points = Point.objects.filter(series_id__in=ids, taken_at__gte=since, taken_at__lte=until)
        return list(points.order_by("taken_at").values_list("taken_at", "value"))
    step = step or ROLLUP_STEP
    return _stepped(ids[0], since, until, step)


def _stepped(
    series_id: int, since: datetime, until: datetime, step: timedelta
) -> list[tuple[datetime, float]]:
    seconds = step.total_seconds()
    sums: dict[float, float] = defaultdict(float)
    counts: dict[float, int] = defaultdict(int)
    rollups = Rollup.objects.filter(series_id=series_id, start__gte=since - ROLLUP_STEP, start__lte=until)
    rolled_until: datetime | None = None
    for start, count, avg in rollups.order_by("start").values_list("start", "count", "value_avg"):
        if start + ROLLUP_STEP <= since:
            continue
        bucket = _epoch(start) // seconds * seconds
        sums[bucket] += avg * count
        counts[bucket] += count
        rolled_until = start + ROLLUP_STEP
    tail_from = max(since, rolled_until) if rolled_until else since
    raw = Point.objects.filter(series_id=series_id, taken_at__gte=tail_from, taken_at__lte=until)
    for taken_at, value in raw.values_list("taken_at", "value"):
        bucket = _epoch(taken_at) // seconds * seconds
        sums[bucket] += value
        counts[bucket] += 1
    tz = since.tzinfo or timezone.get_current_timezone()
    return [(datetime.fromtimestamp(b, tz), sums[b] / counts[b]) for b in sorted(sums) if counts[b]]


def latest(metric: str, scope: str, cluster: str | None = None) -> dict[str, tuple[datetime, float]]:
    """Each name's value in the cluster's newest sampling cycle: {name: (taken_at, value)}. A name
    the newest cycle has no figure for (a broker that did not answer has ``up`` 0 but no TPS; a
    deleted topic) is absent."""
    cluster = cluster or default_cluster()
    ids = _series_ids(metric, scope, cluster)
    cycle = Cycle.objects.filter(cluster=cluster).order_by("-taken_at").first()
    if not ids or cycle is None:
        return {}
    points = Point.objects.filter(series_id__in=list(ids), taken_at=cycle.taken_at)
    return {
        ids[sid]: (taken_at, value)
        for sid, taken_at, value in points.values_list("series_id", "taken_at", "value")
    }


def last_known(
    metric: str, scope: str, since: datetime, cluster: str | None = None
) -> dict[str, tuple[datetime, float]]:
    """Each name's newest raw value since ``since``: ``latest``, and for a name the newest cycle
    has no figure of (a broker that was down, a topic whose count was partial) its value before.
    A rate across such a gap is the counter's growth over the whole gap: nothing it counted is
    dropped."""
    cluster = cluster or default_cluster()
    known = latest(metric, scope, cluster)
    missing = {sid: name for sid, name in _series_ids(metric, scope, cluster).items() if name not in known}
    if not missing:
        return known
    newest = (
        Point.objects.filter(series_id__in=list(missing), taken_at__gte=since)
        .values("series_id")
        .annotate(at=Max("taken_at"))
    )
    # One query a moment: the series missing since one gap share their last cycle (an OR of
    # thousands of (series, moment) pairs is too deep an expression for SQLite).
    by_moment: dict[datetime, list[int]] = defaultdict(list)
    for row in newest:
        by_moment[row["at"]].append(row["series_id"])
    for moment, sids in by_moment.items():
        points = Point.objects.filter(series_id__in=sids, taken_at=moment)
        for sid, value in points.values_list("series_id", "value"):
            known[missing[sid]] = (moment, value)
    return known


def top(
    metric: str,
    scope: str,
    n: int = 10,
    window: timedelta = timedelta(hours=1),
    cluster: str | None = None,
) -> list[tuple[str, float]]:
    """The ``n`` names with the highest average over the last ``window``, highest first; ties by
    name. Names without points in the window are left out. Short windows (``RAW_WINDOW``, within
    raw retention) average raw points; longer ones the rollups, weighted by their point counts —
    a day of raw points is ~2,900 rows a series, of rollups 288 (the last few minutes not rolled
    up yet do not move a day's average)."""
    ids = _series_ids(metric, scope, cluster)
    if not ids or n <= 0:
        return []
    since = clock.now() - window
    if window <= RAW_WINDOW and since >= raw_horizon():
        raw_rows = (
            Point.objects.filter(series_id__in=list(ids), taken_at__gte=since)
            .values("series_id")
            .annotate(avg=Avg("value"))
            .values_list("series_id", "avg")
        )
        averages = {ids[sid]: float(avg) for sid, avg in raw_rows}
    else:
        rollup_rows = (
            Rollup.objects.filter(series_id__in=list(ids), start__gte=since)
            .values("series_id")
            .annotate(total=Sum("count"), weighted=_weighted_sum())
            .values_list("series_id", "total", "weighted")
        )
        averages = {ids[sid]: float(weighted) / total for sid, total, weighted in rollup_rows if total}
    ranked = sorted(averages.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]


def _weighted_sum():
    from django.db.models import F, FloatField

    return Sum(F("value_avg") * F("count"), output_field=FloatField())


def daily_totals(
    metric: str, scope: str, days: int, cluster: str | None = None, names: Iterable[str] | None = None
) -> list[tuple[date, float]]:
    """For a counter metric (messages_in/out, a topic's messages): how much it grew on each of the
    last ``days`` days (today included, the console's time zone), summed over every name of the
    scope (or ``names``), oldest day first, a zero for a day without growth. Growth is summed per
    name (``_increments``): a broker that restarted counts from zero, the others go on."""
    tz = timezone.get_current_timezone()
    today = timezone.localtime(clock.now(), tz).date()
    first = today - timedelta(days=max(days, 1) - 1)
    totals = {first + timedelta(days=i): 0.0 for i in range((today - first).days + 1)}
    since = datetime.combine(first, datetime.min.time(), tz)
    for sid in _counter_ids(metric, scope, cluster, names):
        for moment, grown in _increments(sid, since):
            day = timezone.localtime(moment, tz).date()
            if day in totals:
                totals[day] += grown
    return sorted(totals.items())


def growth_since(
    metric: str, scope: str, since: datetime, cluster: str | None = None, names: Iterable[str] | None = None
) -> dict[str, float]:
    """Each name's counter growth from ``since`` to now (``_increments``); 0 without any."""
    ids = _counter_ids(metric, scope, cluster, names)
    return {name: sum(grown for _, grown in _increments(sid, since)) for sid, name in ids.items()}


def _counter_ids(metric: str, scope: str, cluster: str | None, names: Iterable[str] | None) -> dict[int, str]:
    if not catalogue.is_counter(metric, scope):
        raise ValueError(f"{metric!r} of scope {scope!r} is not a counter: no growth")
    return _series_ids(metric, scope, cluster, names)


def _kept(series_id: int) -> tuple[QuerySet[Point], QuerySet[Rollup]]:
    """A series' raw points not rolled up yet (after its newest rollup), and its rollups: each
    moment once, and a day in 288 rows rather than 2,880 (a rollup's ``value_increase`` is as
    exact as the raw points it sums)."""
    rollups = Rollup.objects.filter(series_id=series_id)
    raw = Point.objects.filter(series_id=series_id)
    newest = rollups.order_by("-start").values_list("start", flat=True).first()
    if newest is not None:
        raw = raw.filter(taken_at__gte=newest + ROLLUP_STEP)
    return raw, rollups


def _value_before(series_id: int, moment: datetime) -> float | None:
    """The series' last value stored before ``moment`` (a rollup's last, for a bucket ended by then)."""
    raw, rollups = _kept(series_id)
    value = raw.filter(taken_at__lt=moment).order_by("-taken_at").values_list("value", flat=True).first()
    if value is None:
        earlier = rollups.filter(start__lte=moment - ROLLUP_STEP).order_by("-start")
        value = earlier.values_list("value_last", flat=True).first()
    return value


def _increments(series_id: int, since: datetime) -> list[tuple[datetime, float]]:
    """A counter's growth from ``since`` on, oldest first, each dated by where it was measured: a
    5-minute rollup's ``value_increase`` (dated by the bucket's start: a bucket never straddles
    midnight), then between consecutive raw points not rolled up yet (a restart between two cycles
    is seen). The growth from the last value before ``since`` is since's."""
    raw, rollups = _kept(series_id)
    previous = _value_before(series_id, since)
    grown: list[tuple[datetime, float]] = []
    buckets = rollups.filter(start__gte=since).order_by("start")
    for start, increase, last in buckets.values_list("start", "value_increase", "value_last"):
        if increase is None:  # rolled up before rollups kept a counter's growth: the last values'
            increase = 0.0 if previous is None else catalogue.counter_increase(previous, last)
        grown.append((start, increase))
        previous = last
    for moment, value in (
        raw.filter(taken_at__gte=since).order_by("taken_at").values_list("taken_at", "value")
    ):
        if previous is not None:
            grown.append((moment, catalogue.counter_increase(previous, value)))
        previous = value
    return grown


def cycles(cluster: str | None = None, since: datetime | None = None) -> list[Cycle]:
    """The sampling cycles of a cluster (newest first): their cost and errors, for a status view."""
    qs = Cycle.objects.filter(cluster=cluster or default_cluster())
    if since is not None:
        qs = qs.filter(taken_at__gte=since)
    return list(qs.order_by("-taken_at"))


def point_counts() -> dict[str, int]:
    """Rows per history table (retention keeps these bounded)."""
    return {
        "series": Series.objects.count(),
        "points": Point.objects.count(),
        "rollups": Rollup.objects.aggregate(n=Count("id"))["n"],
        "cycles": Cycle.objects.count(),
    }
