"""Rollups and retention keep the history tables bounded (a fake clock; days of samples are
inserted directly, then the task's maintenance runs as the clock moves)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from history import query, retention
from history.models import Cycle, Point, Rollup, Series

pytestmark = pytest.mark.django_db

SERIES = 3
STEP = timedelta(minutes=1)


def _sample_hours(series: list[Series], start, hours: int, step: timedelta = STEP) -> None:
    """One point per series per ``step``; the value is the minute's index in the day."""
    points: list[Point] = []
    cycles: list[Cycle] = []
    for i in range(int(timedelta(hours=hours) / step)):
        moment = start + step * i
        cycles.append(Cycle(cluster=series[0].cluster, taken_at=moment, points=len(series)))
        minute = (moment.hour * 60 + moment.minute) * 1.0
        points.extend(Point(series=s, taken_at=moment, value=minute + k) for k, s in enumerate(series))
    Cycle.objects.bulk_create(cycles)
    Point.objects.bulk_create(points, batch_size=2000)


@pytest.fixture
def series(one_cluster):
    return [
        Series.objects.create(cluster=one_cluster, metric="lag", scope="group", name=f"g{k}")
        for k in range(SERIES)
    ]


def test_rollups_summarise_each_five_minutes(fake_clock, series, settings):
    settings.HISTORY_SAMPLE_SECONDS = 30
    start = fake_clock.moment
    _sample_hours(series, start, 1)
    fake_clock.advance(hours=1)
    retention.maintain()
    # A bucket is rolled once its end is the grace (60 s) in the past: not yet the hour's last one.
    assert Rollup.objects.filter(series=series[0]).count() == 11
    fake_clock.advance(minutes=1)
    retention.maintain()
    first = Rollup.objects.get(series=series[1], start=start)
    assert (first.count, first.value_min, first.value_max, first.value_last) == (5, 1.0, 5.0, 5.0)
    assert first.value_avg == pytest.approx(3.0)
    assert Rollup.objects.filter(series=series[0]).count() == 12
    # Idempotent: another run (and a forced re-roll of the same bucket) changes nothing.
    before = list(Rollup.objects.order_by("id").values_list("series_id", "start", "value_avg"))
    retention.maintain()
    retention._roll_range(start, start + retention.BUCKET)
    assert list(Rollup.objects.order_by("id").values_list("series_id", "start", "value_avg")) == before


def test_a_counters_rollup_keeps_its_growth_across_a_restart(fake_clock, series, one_cluster):
    """A broker's put counter restarts inside a bucket: the rollup keeps what was put (from the
    previous bucket's last value, the new counter from zero), a gauge's has no growth."""
    counter = Series.objects.create(cluster=one_cluster, metric="messages_in", scope="broker", name="b:0")
    start = fake_clock.moment
    readings = [(0, 100.0), (1, 107.0), (5, 110.0), (6, 130.0), (7, 4.0), (8, 9.0)]  # restart at 7
    Point.objects.bulk_create(Point(series=counter, taken_at=start + STEP * m, value=v) for m, v in readings)
    Point.objects.bulk_create(Point(series=series[0], taken_at=start + STEP * m, value=1.0) for m in (1, 6))
    fake_clock.advance(minutes=15)
    retention.maintain()
    rolled = dict(Rollup.objects.filter(series=counter).values_list("start", "value_increase"))
    assert rolled == {start: 7.0, start + retention.BUCKET: 3.0 + 20.0 + 4.0 + 5.0}
    assert set(Rollup.objects.filter(series=series[0]).values_list("value_increase", flat=True)) == {None}
    # The day's growth once only rollups are left: 39, not the 9 that the last values (107, then 9
    # after the restart) tell.
    Point.objects.all().delete()
    assert dict(query.daily_totals("messages_in", "broker", days=1))[start.date()] == 39.0


def test_days_of_samples_stay_bounded(fake_clock, series, settings):
    settings.HISTORY_RAW_DAYS = 2
    settings.HISTORY_ROLLUP_DAYS = 4
    start = fake_clock.moment
    # Six days of samples (one per 5 minutes keeps the test short), maintained every 2 hours as
    # the sampler's task would (bounded work per run: at most 24 buckets, i.e. 2 hours, so it keeps up).
    step = timedelta(minutes=5)
    for block in range(6 * 12):
        _sample_hours(series, start + timedelta(hours=2 * block), 2, step)
        fake_clock.moment = start + timedelta(hours=2 * (block + 1))
        done = retention.maintain()
        assert done.buckets <= retention.MAX_BUCKETS
    now = fake_clock.moment
    oldest = Point.objects.order_by("taken_at").first()
    assert oldest is not None
    oldest_raw = oldest.taken_at
    assert oldest_raw >= now - timedelta(days=2) - retention.BUCKET
    assert Point.objects.count() <= SERIES * (2 * 24 * 12 + 10)
    oldest_rollup = Rollup.objects.order_by("start").first()
    assert oldest_rollup is not None and oldest_rollup.start >= now - timedelta(days=4)
    assert Rollup.objects.count() <= SERIES * 4 * 288
    assert Cycle.objects.filter(taken_at__lt=now - timedelta(days=2)).count() == 0
    # The history still reads across both: a 3-day chart from rollups, the last hour raw.
    assert len(query.series("lag", "group", "g0", since=now - timedelta(days=3))) >= 280
    assert len(query.series("lag", "group", "g0", since=now - timedelta(hours=1))) == 12
    # A series whose thing went away is dropped with its last rollup.
    gone = Series.objects.create(cluster=series[0].cluster, metric="lag", scope="group", name="gone")
    retention.prune()
    assert not Series.objects.filter(pk=gone.pk).exists()


def test_a_stopped_sampler_catches_up_without_losing_unrolled_points(fake_clock, series, settings):
    settings.HISTORY_RAW_DAYS = 2
    start = fake_clock.moment
    _sample_hours(series, start, 6)
    # Three days later the maintenance runs again: raw points older than two days stay until rolled.
    fake_clock.advance(days=3)
    first = retention.maintain()
    assert first.buckets == retention.MAX_BUCKETS
    assert Point.objects.filter(taken_at__lt=start + timedelta(hours=2)).count() == 0
    assert Point.objects.filter(taken_at__gte=start + timedelta(hours=2)).count() == SERIES * 4 * 60
    while retention.maintain().buckets:
        pass
    assert Point.objects.count() == 0
    assert Rollup.objects.filter(series=series[0]).count() == 6 * 12
