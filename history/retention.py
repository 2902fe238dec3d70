"""Downsampling and retention of metric history, run after each sampling (``tasks``).

``rollup`` turns raw points into 5-minute rollups (count, avg, min, max, last per series, and a
counter's growth over the bucket, so sums stay exact), in time order from where the last run
stopped; a bucket is rolled once it is complete (its end is ``grace`` in the past, so a cycle
still being stored is not cut in half). ``prune``
deletes raw points older than ``HISTORY_RAW_DAYS`` (never ones not rolled up yet), rollups older
than ``HISTORY_ROLLUP_DAYS``, cycles older than the raw points, and series left without data.

Both are idempotent (a rollup row is unique per series and bucket; inserting one twice is
ignored) and do bounded work per run (``MAX_BUCKETS`` buckets, ``MAX_DELETE_BATCHES`` deletes of
``DELETE_BATCH`` rows per table), so a long-stopped sampler catches up over a few runs instead of
one huge transaction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Subquery

from core import clock
from history import catalogue
from history.models import Cycle, Point, Rollup, Series

BUCKET = timedelta(minutes=5)
MAX_BUCKETS = 24
DELETE_BATCH = 5000
MAX_DELETE_BATCHES = 20


@dataclass
class Maintenance:
    buckets: int = 0
    rollups: int = 0
    points_deleted: int = 0
    rollups_deleted: int = 0
    cycles_deleted: int = 0
    series_deleted: int = 0


def floor_bucket(moment: datetime) -> datetime:
    seconds = BUCKET.total_seconds()
    return datetime.fromtimestamp(moment.timestamp() // seconds * seconds, UTC)


def grace() -> timedelta:
    """How long after a bucket's end its points may still be arriving (a cycle's points carry the
    cycle's start; storing them follows the collection)."""
    return timedelta(seconds=max(60, 2 * int(getattr(settings, "HISTORY_SAMPLE_SECONDS", 30))))


def raw_days() -> float:
    return float(getattr(settings, "HISTORY_RAW_DAYS", 2))


def rollup_days() -> float:
    return float(getattr(settings, "HISTORY_ROLLUP_DAYS", 30))


def rolled_until() -> datetime | None:
    """The end of the newest rolled bucket: raw points before it are in rollups."""
    newest = Rollup.objects.aggregate(newest=Max("start"))["newest"]
    return newest + BUCKET if newest else None


def rollup(max_buckets: int = MAX_BUCKETS) -> tuple[int, int]:
    """Roll the complete buckets of the next ``max_buckets`` times 5 minutes that hold points (one
    read, one bulk insert); (buckets, rollup rows written)."""
    now = clock.now()
    complete_before = floor_bucket(now - grace())
    cursor = rolled_until()
    oldest_kept = floor_bucket(now - timedelta(days=rollup_days()))
    if cursor is None or cursor < oldest_kept:
        cursor = oldest_kept
    # Jump over gaps (the sampler was stopped): start at the first bucket with points.
    first = (
        Point.objects.filter(taken_at__gte=cursor, taken_at__lt=complete_before)
        .order_by("taken_at")
        .values_list("taken_at", flat=True)
        .first()
    )
    if first is None:
        return 0, 0
    start = floor_bucket(first)
    end = min(complete_before, start + BUCKET * max_buckets)
    return _roll_range(start, end)


def _roll_range(start: datetime, end: datetime) -> tuple[int, int]:
    """Rollups of every bucket in [start, end) (both on bucket boundaries)."""
    seconds = BUCKET.total_seconds()
    values: dict[tuple[float, int], list[float]] = defaultdict(list)
    points = Point.objects.filter(taken_at__gte=start, taken_at__lt=end).order_by("taken_at")
    for series_id, taken_at, value in points.values_list("series_id", "taken_at", "value").iterator(
        chunk_size=5000
    ):
        values[(taken_at.timestamp() // seconds * seconds, series_id)].append(value)
    carried = _counters_before({series_id for _, series_id in values}, start)
    rollups = []
    for (bucket, series_id), figures in sorted(values.items()):  # oldest bucket first: carried on
        increase = None
        if series_id in carried:
            increase, carried[series_id] = _increase(carried[series_id], figures)
        rollups.append(
            Rollup(
                series_id=series_id,
                start=datetime.fromtimestamp(bucket, UTC),
                count=len(figures),
                value_avg=sum(figures) / len(figures),
                value_min=min(figures),
                value_max=max(figures),
                value_last=figures[-1],
                value_increase=increase,
            )
        )
    Rollup.objects.bulk_create(rollups, batch_size=1000, ignore_conflicts=True)
    return len({bucket for bucket, _ in values}), len(rollups)


def _counters_before(series_ids: set[int], start: datetime) -> dict[int, float | None]:
    """The counter series among ``series_ids``, each with its last value before ``start`` (its
    newest rollup's last value: everything before ``start`` is rolled), None when it has none."""
    kinds = Series.objects.filter(id__in=series_ids).values_list("id", "metric", "scope")
    counters = [sid for sid, metric, scope in kinds if catalogue.is_counter(metric, scope)]
    newest = Rollup.objects.filter(series_id=OuterRef("series_id"), start__lt=start).order_by("-start")
    last = Rollup.objects.filter(
        series_id__in=counters, start=Subquery(newest.values("start")[:1])
    ).values_list("series_id", "value_last")
    return {**dict.fromkeys(counters), **dict(last)}


def _increase(before: float | None, figures: list[float]) -> tuple[float, float]:
    """A counter's growth through ``figures`` from ``before`` (None: from its first figure), and
    its last figure."""
    grown = 0.0
    for value in figures:
        if before is not None:
            grown += catalogue.counter_increase(before, value)
        before = value
    return grown, figures[-1]


def _delete_oldest(model, time_field: str, before: datetime) -> int:
    deleted = 0
    for _ in range(MAX_DELETE_BATCHES):
        ids = list(
            model.objects.filter(**{f"{time_field}__lt": before})
            .order_by()
            .values_list("id", flat=True)[:DELETE_BATCH]
        )
        if not ids:
            break
        with transaction.atomic():
            deleted += model.objects.filter(id__in=ids).delete()[0]
    return deleted


def prune() -> Maintenance:
    now = clock.now()
    done = Maintenance()
    raw_horizon = now - timedelta(days=raw_days())
    rolled = rolled_until()
    # Raw points not rolled up yet stay, however old, until the rollup has them.
    points_before = min(raw_horizon, rolled) if rolled else None
    if points_before is not None:
        done.points_deleted = _delete_oldest(Point, "taken_at", points_before)
    done.rollups_deleted = _delete_oldest(Rollup, "start", now - timedelta(days=rollup_days()))
    done.cycles_deleted = _delete_oldest(Cycle, "taken_at", raw_horizon)
    orphans = Series.objects.filter(
        ~Exists(Point.objects.filter(series_id=OuterRef("pk"))),
        ~Exists(Rollup.objects.filter(series_id=OuterRef("pk"))),
    )
    ids = list(orphans.values_list("id", flat=True)[:DELETE_BATCH])
    if ids:
        done.series_deleted = Series.objects.filter(id__in=ids).delete()[0]
    return done


def maintain() -> Maintenance:
    """Rollup, then prune (so nothing is pruned before it is rolled up)."""
    buckets, rows = rollup()
    done = prune()
    done.buckets, done.rollups = buckets, rows
    return done
