"""The cost of one evaluation is bounded: the same number of queries for 30 groups as for 300 (reads
cover every subject of a metric at once, writes are bulk), with the default rules and 10 minutes of
history; the figures for ~300 groups are printed (``-s``)."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts.defaults import create_default_rules
from alerts.evaluation import evaluate
from alerts.models import AlertEvent, AlertRule
from history.models import Cycle
from history.sampler import store
from tests.alerts.cycles import CLUSTER

CYCLES = 20  # ten minutes at the default 30-s sampling


def fill_history(fake_clock, groups: int, lagging: int) -> None:
    """``CYCLES`` cycles of ``groups`` groups (the first ``lagging`` of them with a growing lag and
    no consumption) and two brokers; stored as the sampler stores them, no evaluation on the way."""
    for n in range(CYCLES):
        figures = {}
        for g in range(groups):
            growing = g < lagging
            figures[("lag", "group", f"group-{g:04d}")] = 20_000.0 + 500 * n if growing else 0.0
            figures[("consume_tps", "group", f"group-{g:04d}")] = 0.0 if growing else 12.5
            figures[("dlq_messages", "group", f"group-{g:04d}")] = float(n if growing else 0)
        for broker in ("broker-a:0", "broker-b:0"):
            healthy = {"up": 1.0, "disk_ratio": 0.4, "request_wait_ms": 0.0, "replication_lag_bytes": 0.0}
            figures.update({(metric, "broker", broker): value for metric, value in healthy.items()})
        store(Cycle(cluster=CLUSTER, taken_at=fake_clock(), points=len(figures)), figures)
        if n < CYCLES - 1:
            fake_clock.advance(seconds=30)


def measure(fake_clock) -> tuple[int, float]:
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        evaluate(fake_clock(), CLUSTER)
        seconds = time.perf_counter() - started
    return len(queries), seconds


@pytest.mark.parametrize("groups", [30, 300])
def test_queries_per_evaluation_do_not_grow_with_groups(db, fake_clock, settings, groups, capsys):
    settings.ALERT_WEBHOOK_URLS, settings.ALERT_EMAIL_TO = [], []
    AlertRule.objects.all().delete()
    create_default_rules(AlertRule)
    fill_history(fake_clock, groups, lagging=groups // 10)
    first_queries, first_seconds = measure(fake_clock)  # opens pending/firing events for the lagging tenth
    fake_clock.advance(seconds=30)
    steady_queries, steady_seconds = measure(fake_clock)  # updates them
    opened = AlertEvent.objects.count()
    assert opened == 4 * (groups // 10)  # lag, growing, dead letters, not consuming: each lagging group
    # Reads: rules, open events, silences, 2-3 per distinct metric read; writes in bulk. SQLite
    # splits a bulk write into batches of its variable limit, hence the slack over the fixed part.
    assert steady_queries <= 40 and first_queries <= 40, (first_queries, steady_queries)
    with capsys.disabled():
        print(
            f"\nalert evaluation, {groups} groups, 10 default rules, {CYCLES} cycles of history: "
            f"first {first_queries} queries {first_seconds * 1000:.0f} ms ({opened} events opened), "
            f"steady {steady_queries} queries {steady_seconds * 1000:.0f} ms"
        )
