"""A running report proves its worker is alive; runs whose worker went silent are failed with the
reason, and nothing else is touched."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from django.test import override_settings
from django.utils import timezone

from analytics.models import ReportRun
from analytics.runner import fail_abandoned_runs, heartbeat
from broker.local_cluster import wait_until


def a_run(status: str, **fields) -> ReportRun:
    return ReportRun.objects.create(report="all", input_uri="/nowhere", status=status, **fields)


@override_settings(ANALYTICS_ABANDONED_AFTER=60, ANALYTICS_HEARTBEAT_SECONDS=15)
def test_only_silent_running_runs_are_failed(db):
    now = timezone.now()
    long_ago = now - timedelta(minutes=30)
    silent = a_run(ReportRun.RUNNING, started_at=long_ago, heartbeat_at=now - timedelta(minutes=5))
    beating = a_run(ReportRun.RUNNING, started_at=long_ago, heartbeat_at=now - timedelta(seconds=10))
    # Started by a worker from before heartbeats: judged by its start.
    legacy = a_run(ReportRun.RUNNING, started_at=now - timedelta(minutes=5))
    young_legacy = a_run(ReportRun.RUNNING, started_at=now - timedelta(seconds=5))
    queued = a_run(ReportRun.QUEUED)
    done = a_run(ReportRun.DONE, started_at=long_ago, heartbeat_at=long_ago)

    assert fail_abandoned_runs() == 2
    runs = (silent, beating, legacy, young_legacy, queued, done)
    statuses = {run.pk: ReportRun.objects.get(pk=run.pk) for run in runs}
    assert [statuses[r.pk].status for r in (silent, legacy)] == [ReportRun.FAILED] * 2
    assert [statuses[r.pk].status for r in (beating, young_legacy, queued, done)] == [
        ReportRun.RUNNING, ReportRun.RUNNING, ReportRun.QUEUED, ReportRun.DONE,
    ]  # fmt: skip
    failed = statuses[silent.pk]
    assert failed.finished_at is not None and failed.stage == "failed"
    assert "the worker running this report stopped" in failed.error and "every 15 s" in failed.error
    assert fail_abandoned_runs() == 0  # nothing twice


def test_the_heartbeat_beats_while_the_block_runs_and_stops_after(transactional_db):
    # transactional_db: the heartbeat thread has its own connection and must see the row.
    run = a_run(ReportRun.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())
    first = run.heartbeat_at
    assert first is not None

    def beat_again() -> bool:
        beat = ReportRun.objects.get(pk=run.pk).heartbeat_at
        return beat is not None and beat > first

    with heartbeat(run.pk, 0.05):
        assert wait_until(beat_again, timeout=10)
    # Stopped with the block: its thread is gone, so nothing can beat any more.
    beating = [t for t in threading.enumerate() if t.name == f"report-run-{run.pk}-heartbeat"]
    assert beating == []


def test_a_finished_run_is_not_revived_by_a_late_beat(transactional_db):
    run = a_run(ReportRun.FAILED, started_at=timezone.now(), heartbeat_at=timezone.now() - timedelta(hours=1))
    with heartbeat(run.pk, 0.05):
        time.sleep(0.2)
    assert ReportRun.objects.get(pk=run.pk).heartbeat_at == run.heartbeat_at
