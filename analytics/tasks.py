"""Celery tasks (A2): a report started in the console, and one started by a beat schedule."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from .models import ReportRun
from .runner import execute_run

RUN_REPORT = "analytics.tasks.run_report"
RUN_SCHEDULED_REPORT = "analytics.tasks.run_scheduled_report"


@shared_task(name=RUN_REPORT)
def run_report(run_id: int) -> str:
    return execute_run(run_id).status


@shared_task(name=RUN_SCHEDULED_REPORT, bind=True)
def run_scheduled_report(self, report: str, topics: list[str] | None = None, window_hours: int = 0,
                         input_uri: str = "", schedule_name: str = "") -> str:  # fmt: skip
    """A beat schedule's run: covers the last ``window_hours`` hours (0 = everything archived)."""
    now = timezone.now()
    run = ReportRun.objects.create(
        report=report, topics=list(topics or []), input_uri=input_uri or settings.ANALYTICS_ARCHIVE_URI,
        start_time=now - timedelta(hours=window_hours) if window_hours else None,
        end_time=now if window_hours else None, trigger=ReportRun.TRIGGER_SCHEDULE,
        schedule_name=schedule_name, celery_task_id=self.request.id or "",
    )  # fmt: skip
    return execute_run(run.pk).status
