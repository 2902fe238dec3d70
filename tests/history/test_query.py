"""history.query over points written directly (a fake clock; no broker)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from history import query
from history.models import Cycle, Point, Rollup, Series

pytestmark = pytest.mark.django_db


def _store(cluster, taken_at, figures):
    """One cycle: {(metric, scope, name): value}."""
    Cycle.objects.create(cluster=cluster, taken_at=taken_at, points=len(figures))
    for (metric, scope, name), value in figures.items():
        series, _ = Series.objects.get_or_create(cluster=cluster, metric=metric, scope=scope, name=name)
        Point.objects.create(series=series, taken_at=taken_at, value=value)


def test_series_latest_top_over_raw_points(fake_clock, one_cluster):
    start = fake_clock.moment
    for i in range(120):  # an hour at 30 s
        moment = start + timedelta(seconds=30 * i)
        _store(
            one_cluster,
            moment,
            {("lag", "group", "g1"): i, ("lag", "group", "g2"): 10.0, ("lag", "group", "g3"): 200.0 - i},
        )
    fake_clock.moment = start + timedelta(seconds=30 * 119)
    points = query.series("lag", "group", "g1", since=start)
    assert [v for _, v in points] == list(range(120))
    assert points[0][0] == start
    newest = query.latest("lag", "group")
    assert newest == {
        "g1": (fake_clock.moment, 119.0),
        "g2": (fake_clock.moment, 10.0),
        "g3": (fake_clock.moment, 81.0),
    }
    ranked = query.top("lag", "group", n=2, window=timedelta(hours=2))
    assert [name for name, _ in ranked] == ["g3", "g1"]
    assert ranked[0][1] == pytest.approx(sum(200 - i for i in range(120)) / 120)
    with pytest.raises(KeyError):
        query.series("nope", "group", "g1", since=start)


def test_long_window_uses_rollups_and_raw_tail(fake_clock, one_cluster):
    series = Series.objects.create(cluster=one_cluster, metric="tps_in", scope="topic", name="t")
    start = fake_clock.moment
    # Six days of 5-minute rollups with value = hour of the day, then 20 raw minutes after them.
    buckets = 6 * 288
    Rollup.objects.bulk_create(
        Rollup(
            series=series,
            start=start + timedelta(minutes=5 * i),
            count=10,
            value_avg=float((i // 12) % 24),
            value_min=0.0,
            value_max=24.0,
            value_last=1.0,
        )
        for i in range(buckets)
    )
    tail_start = start + timedelta(minutes=5 * buckets)
    for i in range(40):
        Point.objects.create(series=series, taken_at=tail_start + timedelta(seconds=30 * i), value=99.0)
    fake_clock.moment = tail_start + timedelta(minutes=20)
    week = query.series("tps_in", "topic", "t", since=fake_clock.moment - timedelta(days=7))
    assert 150 <= len(week) <= 310
    assert week[-1][1] == 99.0  # the newest, not yet rolled up, minutes are there
    day = query.series("tps_in", "topic", "t", since=fake_clock.moment - timedelta(days=1))
    assert 280 <= len(day) <= 300
    # A 5-minute step inside the day keeps its hour's value.
    assert {v for _, v in day[:-4]} <= {float(h) for h in range(24)}
