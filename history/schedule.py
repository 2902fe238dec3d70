"""The default beat entry of the sampler, created once (at ``migrate``) and then left to the
operator: an interval changed or a task disabled in /admin/ is not put back."""

from __future__ import annotations

from django.conf import settings

SCHEDULE_NAME = "history-sample"


def ensure_default_schedule(**_kwargs) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from history.tasks import SAMPLE_TASK

    if PeriodicTask.objects.filter(name=SCHEDULE_NAME).exists():
        return
    seconds = max(5, int(getattr(settings, "HISTORY_SAMPLE_SECONDS", 30)))
    interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={
            "task": SAMPLE_TASK,
            "interval": interval,
            "expire_seconds": seconds,
            "description": "Metric history: sample every configured cluster, roll up and prune",
        },
    )
