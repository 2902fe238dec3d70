"""Executing one ``ReportRun``: the bridge between the database and the Spark job.

Progress and the outcome are written to the run's row as the job goes, so any web process (or
one restarted mid-run) shows the same state; a failure keeps its reason.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.heartbeats import beating, silent_since

from .models import ReportRow, ReportRun

log = logging.getLogger(__name__)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def _update(run: ReportRun, **fields) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    ReportRun.objects.filter(pk=run.pk).update(**fields)


def execute_run(run_id: int) -> ReportRun:
    """Run the report of ``run_id`` to done or failed (never raises for a job failure)."""
    run = ReportRun.objects.get(pk=run_id)
    if run.finished:
        return run  # a redelivered task message must not run a finished report again
    output_dir = settings.ANALYTICS_REPORTS_DIR / f"run-{run.pk}"
    now = timezone.now()
    _update(run, status=ReportRun.RUNNING, started_at=now, heartbeat_at=now, progress=1,
            stage="starting Spark", spark_master=settings.SPARK_MASTER, output_dir=str(output_dir),
            error="")  # fmt: skip
    with heartbeat(run.pk, settings.ANALYTICS_HEARTBEAT_SECONDS):
        try:
            _run_job(run, output_dir)
        except Exception as exc:
            log.exception("report run %s failed", run.pk)
            _update(run, status=ReportRun.FAILED, stage="failed", finished_at=timezone.now(),
                    error=failure_reason(exc))  # fmt: skip
    return run


def _run_job(run: ReportRun, output_dir) -> None:
    from .spark.job import ReportRequest, run_report
    from .spark.session import report_session

    request = ReportRequest(
        report=run.report, input_uri=run.input_uri, output_dir=str(output_dir),
        start_ms=_ms(run.start_time), end_ms=_ms(run.end_time), topics=list(run.topics or []),
    )  # fmt: skip
    with report_session(settings.SPARK_MASTER, settings.ANALYTICS_SHUFFLE_PARTITIONS,
                        settings.ANALYTICS_SPARK_IDLE_SECONDS) as spark:  # fmt: skip
        result = run_report(spark, request, lambda pct, stage: _update(run, progress=pct, stage=stage))
    with transaction.atomic():
        run.report_rows.all().delete()
        ReportRow.objects.bulk_create(
            ReportRow(run=run, section=section, position=i, values=_jsonable(row))
            for section, rows in result.sections.items()
            for i, row in enumerate(rows)
        )
        _update(run, status=ReportRun.DONE, progress=100, stage="done", finished_at=timezone.now(),
                output_files=result.files)  # fmt: skip


@contextlib.contextmanager
def heartbeat(run_id: int, interval_s: float) -> Iterator[None]:
    """While the block runs, touch the run's ``heartbeat_at`` every ``interval_s`` from a thread
    of its own (a Spark stage can run for minutes without reporting progress)."""
    running = ReportRun.objects.filter(pk=run_id, status=ReportRun.RUNNING)
    with beating(running, interval_s, f"report-run-{run_id}"):
        yield


def fail_abandoned_runs() -> int:
    """Mark failed the runs whose worker stopped mid-run (no heartbeat for
    ``ANALYTICS_ABANDONED_AFTER`` seconds); return how many. A worker killed by a signal or by
    the kernel cannot record its own end, so the pages would otherwise show them running forever."""
    now, cutoff = timezone.now(), silent_since()
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    failed = 0
    for run in ReportRun.objects.filter(silent, status=ReportRun.RUNNING):
        last_sign = run.heartbeat_at or run.started_at  # (runs started before heartbeats existed)
        assert last_sign is not None  # ``silent`` matches a null heartbeat only with a start
        reason = (
            f"the worker running this report stopped: no heartbeat since "
            f"{last_sign.isoformat(timespec='seconds')} (expected every "
            f"{settings.ANALYTICS_HEARTBEAT_SECONDS:g} s). Start the report again."
        )
        # Only if it is still silent: a worker that beat meanwhile keeps its run.
        failed += ReportRun.objects.filter(pk=run.pk, status=ReportRun.RUNNING,
                                           heartbeat_at=run.heartbeat_at).update(
            status=ReportRun.FAILED, stage="failed", finished_at=now, error=reason
        )  # fmt: skip
    return failed


def failure_reason(exc: BaseException) -> str:
    """The reason shown on the run's page: the exception, and for Spark errors their first lines
    (a JVM stack trace is hundreds of lines; the cause is at the top)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [line for line in text.splitlines() if line.strip()]
    reason = "\n".join(lines[:12])
    if not reason:
        reason = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return reason[:4000]


def _jsonable(row: dict) -> dict:
    return {key: (value.isoformat() if isinstance(value, datetime) else value) for key, value in row.items()}
