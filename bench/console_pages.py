"""Console page benchmark: server time of the topic list, group list and group detail pages, and
the metric-history sampler's cost per cycle.

    python bench/console_pages.py [--topics 1000] [--groups 300] [--requests 30]
                                  [--sampler-cycles 5] [--history-days 30]
                                  [--history-raw-hours 48] [--json]

Starts a name server and two brokers (as the tests do), creates the topics on both brokers and the
groups with a committed offset each (so every group has progress to compute), then times the
console's views through Django's test client: that is server time, without a browser or network.
Prints p50 / p95 in milliseconds per page. The sampler part runs history's sampling cycles on the
same cluster (collection through the admin client plus the bulk insert into the console's
database) and prints seconds, requests and stored points per cycle. The history part then fills
the history tables as 30 days of sampling would (5-minute rollups of every series the sampler
stored, raw points for the last 48 hours) and times the history charts' JSON (hour, day, week),
the history page (top 10 over each window), the daily totals and the group page with its charts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


CLUSTER = "ConsolePagesBench"
# Small store files: thousands of topics must not preallocate the disk away.
SMALL_BROKERS = {
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    "mappedFileSizeCommitLog": 4194304,
}


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def populate(admin, cluster_name: str, topics: int, groups: int) -> tuple[list[str], list[str]]:
    """Topics on both brokers, groups with a config and one committed offset each (requests fanned out)."""
    from core.cluster_queries import fan_out

    masters = admin.resolve_masters(None, cluster_name)
    topic_names = [f"BenchTopic{i:04d}" for i in range(topics)]
    group_names = [f"bench-group-{i:03d}" for i in range(groups)]
    core = admin.core

    async def group_with_offset(addr: str, group: str, topic: str) -> None:
        await core.create_or_update_subscription_group(addr, group)
        await core.update_consumer_offset(addr, group, topic, 0, 0)

    calls = [core.create_or_update_topic(addr, t, 4, 4) for addr in masters for t in topic_names]
    failures = [r for r in admin.run(fan_out(calls)) if isinstance(r, BaseException)]
    calls = [
        group_with_offset(addr, g, topic_names[i % topics])
        for addr in masters
        for i, g in enumerate(group_names)
    ]
    failures += [r for r in admin.run(fan_out(calls)) if isinstance(r, BaseException)]
    if failures:
        raise SystemExit(f"populating failed: {failures[0]}")
    return topic_names, group_names


def time_page(client, path: str, requests: int) -> dict[str, float]:
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}: {response.content[:300]!r}")
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(percentile(samples, 0.95), 1)}


def sampler_cost(admin, namesrv: str, cycles: int) -> dict[str, float]:
    """Mean cost of ``cycles`` history sampling cycles of the cluster (after one warm-up cycle):
    wall seconds (collect + store), the collection's share, requests sent, points stored."""
    from history import sampler

    sampler.sample(namesrv, admin)
    walls, collects, requests, points = [], [], [], []
    for _ in range(cycles):
        started = time.perf_counter()
        cycle = sampler.sample(namesrv, admin).cycle
        walls.append(time.perf_counter() - started)
        collects.append(cycle.seconds)
        requests.append(cycle.requests)
        points.append(cycle.points)
        if cycle.errors:
            raise SystemExit(f"sampling cycle failed: {cycle.errors[:3]}")
    return {
        "cycles": cycles,
        "seconds_per_cycle": round(statistics.mean(walls), 3),
        "max_seconds_per_cycle": round(max(walls), 3),
        "collect_seconds_per_cycle": round(statistics.mean(collects), 3),
        "requests_per_cycle": round(statistics.mean(requests), 1),
        "points_per_cycle": round(statistics.mean(points), 1),
    }


def store_history(namesrv: str, days: float, raw_hours: float) -> dict[str, float]:
    """Fill metric history as ``days`` of the sampler would leave it, for every series the sampler
    cycles created (every catalogue metric of every broker, topic, group and cluster): a 5-minute
    rollup per series per bucket over ``days``, and raw points every HISTORY_SAMPLE_SECONDS over the
    last ``raw_hours`` (raw retention). The rows are made by the database itself (INSERT ... SELECT
    over a table of times): the bench measures reading them, not the sampler, and tens of millions
    of rows through Python would take longer than the rest of the bench."""
    from datetime import timedelta

    from django.conf import settings

    from core import clock
    from history.models import Point, Rollup, Series

    now = clock.now()
    step = timedelta(minutes=5)
    last_bucket = now - timedelta(seconds=now.timestamp() % 300)
    buckets = [last_bucket - step * i for i in range(int(days * 288), 0, -1)]
    every = timedelta(seconds=int(getattr(settings, "HISTORY_SAMPLE_SECONDS", 30)))
    raw_times = [now - every * i for i in range(int(raw_hours * 3600 / every.total_seconds()), 0, -1)]
    series = Series.objects.filter(cluster=namesrv).count()
    started = time.perf_counter()
    with _indexes_dropped((Rollup, Point)):
        _insert_for_every_series(
            namesrv,
            Rollup._meta.db_table,
            "start, count, value_avg, value_min, value_max, value_last",
            "t.at, 10, (s.id % 97) + (t.n % 7), (s.id % 97), (s.id % 97) + 7, (s.id % 97) + (t.n % 7)",
            buckets,
        )
        _insert_for_every_series(
            namesrv, Point._meta.db_table, "taken_at, value", "t.at, (s.id % 97) + (t.n % 5)", raw_times
        )
    return {
        "series": series,
        "rollups": series * len(buckets),
        "raw_points": series * len(raw_times),
        "insert_seconds": round(time.perf_counter() - started, 1),
    }


def _insert_for_every_series(namesrv: str, table: str, columns: str, values: str, times: list) -> None:
    """One row per series of ``namesrv`` per time: ``values`` over ``s`` (the series) and ``t`` (the
    time ``at`` and its number ``n``), series by series in time order, as the sampler's rows are."""
    from django.db import connection, transaction

    from history.models import Series

    at_type = "timestamp with time zone" if connection.vendor == "postgresql" else "text"
    adapt = connection.ops.adapt_datetimefield_value
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE bench_times (n integer, at {at_type})")
        cursor.executemany(
            "INSERT INTO bench_times (n, at) VALUES (%s, %s)", list(enumerate(map(adapt, times)))
        )
        cursor.execute(
            f"INSERT INTO {table} (series_id, {columns}) SELECT s.id, {values} "
            f"FROM {Series._meta.db_table} s CROSS JOIN bench_times t WHERE s.cluster = %s "
            "ORDER BY s.id, t.n",
            [namesrv],
        )
        cursor.execute("DROP TABLE bench_times")


@contextmanager
def _indexes_dropped(models):
    """The tables' secondary indexes off while they are filled and built again after (as fast as
    the database sorts): inserting into every time index at random places takes many minutes.
    Unique constraints stay (the rows arrive in their order)."""
    from django.db import connection

    tables = [model._meta.db_table for model in models]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            marks = ", ".join(["%s"] * len(tables))
            cursor.execute(
                f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                f"AND tbl_name IN ({marks})",
                tables,
            )
        else:  # PostgreSQL: indexes that are no constraint's
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexname NOT IN "
                "(SELECT conname FROM pg_constraint)",
                [tables],
            )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for _, definition in indexes:
                cursor.execute(definition)


def history_pages(client, topics: list[str], groups: list[str], requests: int) -> dict[str, dict[str, float]]:
    """Server time of the history charts' JSON (each window), the history page and the daily
    totals, over the history ``store_history`` wrote."""
    topic, group = topics[len(topics) // 2], groups[len(groups) // 2]
    paths = {}
    for window in ("hour", "day", "week"):
        paths[f"group lag chart ({window})"] = f"/history/charts/group/lag.json?name={group}&window={window}"
        paths[f"topic TPS chart ({window})"] = f"/history/charts/topic/tps.json?name={topic}&window={window}"
        paths[f"cluster TPS chart ({window})"] = f"/history/charts/cluster/broker-tps.json?window={window}"
        paths[f"history page ({window})"] = f"/history/?window={window}"
    paths["daily totals (30 days)"] = "/history/daily.json?days=30"
    paths["group detail page"] = f"/groups/{group}/"
    for path in paths.values():
        client.get(path)
    results = {name: time_page(client, path, requests) for name, path in paths.items()}
    # The history page keeps its rankings until the next sampling cycle; the first view after a
    # cycle computes them: timed with the cache emptied before each request.
    from django.core.cache import cache

    for window in ("hour", "day", "week"):
        samples = []
        for _ in range(max(3, requests // 4)):
            cache.clear()
            started = time.perf_counter()
            client.get(f"/history/?window={window}")
            samples.append((time.perf_counter() - started) * 1000)
        results[f"history page ({window}, 1st view)"] = {
            "p50_ms": round(statistics.median(samples), 1),
            "p95_ms": round(percentile(samples, 0.95), 1),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page")
    parser.add_argument(
        "--sampler-cycles", type=int, default=5, help="history sampling cycles timed (0: none)"
    )
    parser.add_argument(
        "--history-days", type=float, default=30, help="days of 5-minute rollups to read back (0: skip)"
    )
    parser.add_argument(
        "--history-raw-hours", type=float, default=48, help="hours of raw points (raw retention)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    from broker.local_cluster import start_cluster

    with tempfile.TemporaryDirectory(prefix="console-bench-") as workdir:
        os.environ["CONSOLE_VAR_DIR"] = str(Path(workdir) / "var")
        # 300 entries per consume-queue file: 8,000 queues must not preallocate 48 GB of disk.
        settings = {**SMALL_BROKERS, "mappedFileSizeConsumeQueue": 300 * 20}
        cluster = start_cluster(Path(workdir), ("broker-a", "broker-b"), CLUSTER, settings)
        try:
            os.environ["BROKER_NAMESRV"] = cluster.namesrv_addr
            import django

            django.setup()
            from django.contrib.auth.models import User
            from django.core.management import call_command
            from django.test import Client

            from core.cluster_access import admin_for, close_all

            call_command("migrate", verbosity=0)
            admin = admin_for(cluster.namesrv_addr)
            started = time.perf_counter()
            topics, groups = populate(admin, CLUSTER, args.topics, args.groups)
            setup_s = time.perf_counter() - started
            user = User.objects.create_superuser("bench", password="bench-password-not-secret")
            client = Client(HTTP_HOST="127.0.0.1")
            client.force_login(user)
            pages = {
                "topic list": "/topics/",
                "group list": "/groups/",
                "group detail": f"/groups/{groups[len(groups) // 2]}/",
            }
            for path in pages.values():  # warm connections and caches once
                client.get(path)
            results = {name: time_page(client, path, args.requests) for name, path in pages.items()}
            sampler = (
                sampler_cost(admin, cluster.namesrv_addr, args.sampler_cycles)
                if args.sampler_cycles
                else None
            )
            history: dict[str, Any] | None = None
            if args.history_days:
                stored = store_history(cluster.namesrv_addr, args.history_days, args.history_raw_hours)
                history = {"stored": stored, "pages": history_pages(client, topics, groups, args.requests)}
            close_all()
        finally:
            cluster.stop()
    if args.json:
        figures = {"topics": args.topics, "groups": args.groups, "brokers": 2, "pages": results}
        print(json.dumps({**figures, "sampler": sampler, "history": history}))
    else:
        print(
            f"{args.topics} topics, {args.groups} groups on 2 brokers (set-up {setup_s:.1f} s); "
            f"server time over {args.requests} requests:"
        )
        for name, figures in results.items():
            print(f"  {name:<13} p50 {figures['p50_ms']:>7.1f} ms   p95 {figures['p95_ms']:>7.1f} ms")
        if sampler:
            print(
                f"  history sampler: {sampler['seconds_per_cycle']:.2f} s per cycle "
                f"(max {sampler['max_seconds_per_cycle']:.2f} s; collection "
                f"{sampler['collect_seconds_per_cycle']:.2f} s), "
                f"{sampler['requests_per_cycle']:.0f} requests and {sampler['points_per_cycle']:.0f} points "
                f"per cycle, over {sampler['cycles']} cycles"
            )
        if history:
            stored = history["stored"]
            print(
                f"  history: {stored['series']} series, {stored['rollups']:,} rollups "
                f"({args.history_days:g} days) "
                f"and {stored['raw_points']:,} raw points ({args.history_raw_hours:g} h) "
                f"(inserted in {stored['insert_seconds']:.0f} s); server time:"
            )
            for name, figures in history["pages"].items():
                print(f"    {name:<32} p50 {figures['p50_ms']:>7.1f} ms   p95 {figures['p95_ms']:>7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
