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


def test_daily_totals_sum_counter_growth_per_day_across_a_restart(fake_clock, one_cluster, settings):
    settings.TIME_ZONE = "UTC"
    a = Series.objects.create(cluster=one_cluster, metric="messages_in", scope="broker", name="broker-a:0")
    b = Series.objects.create(cluster=one_cluster, metric="messages_in", scope="broker", name="broker-b:0")
    start = fake_clock.moment  # midnight
    # broker-a puts 10 messages per 5 minutes for two days (older day as rollups, today raw) and
    # restarts at noon today (its counter starts again from 0); broker-b puts 1 per 5 minutes today.
    Rollup.objects.bulk_create(
        Rollup(
            series=a,
            start=start + timedelta(minutes=5 * i),
            count=1,
            value_avg=10.0 * (i + 1),
            value_min=10.0 * (i + 1),
            value_max=10.0 * (i + 1),
            value_last=10.0 * (i + 1),
        )
        for i in range(288)
    )
    today = start + timedelta(days=1)
    value = 10.0 * 288
    for i in range(1, 289):
        moment = today + timedelta(minutes=5 * i)
        value = 10.0 * (i - 144) if i > 144 else value + 10
        Point.objects.create(series=a, taken_at=moment - timedelta(seconds=1), value=value)
        Point.objects.create(series=b, taken_at=moment - timedelta(seconds=1), value=1000.0 + i)
    fake_clock.moment = today + timedelta(hours=23, minutes=59)
    totals = dict(query.daily_totals("messages_in", "broker", days=3))
    day0, day1 = start.date(), today.date()
    # Day 0: 287 increases of 10 (the first bucket has no earlier value to grow from).
    assert totals[day0] == 2870
    # Today: a's 288 increases of 10, its restart counting the new value; b's 287 increases of 1
    # (its first value has nothing before it).
    assert totals[day1] == 2880 + 287
    assert totals[day0 - timedelta(days=1)] == 0
    with pytest.raises(ValueError):
        query.daily_totals("lag", "group", days=1)


def test_top_over_a_long_window_reads_rollups(fake_clock, one_cluster):
    busy = Series.objects.create(cluster=one_cluster, metric="tps_in", scope="topic", name="busy")
    quiet = Series.objects.create(cluster=one_cluster, metric="tps_in", scope="topic", name="quiet")
    start = fake_clock.moment
    Rollup.objects.bulk_create(
        Rollup(
            series=s,
            start=start + timedelta(minutes=5 * i),
            count=c,
            value_avg=v,
            value_min=v,
            value_max=v,
            value_last=v,
        )
        for i in range(5 * 288)
        for s, c, v in ((busy, 10, 100.0 + i % 2), (quiet, 10, 1.0))
    )
    fake_clock.moment = start + timedelta(days=5)
    assert query.top("tps_in", "topic", n=1, window=timedelta(days=4)) == [("busy", pytest.approx(100.5))]
    assert [name for name, _ in query.top("tps_in", "topic", window=timedelta(days=4))] == ["busy", "quiet"]
