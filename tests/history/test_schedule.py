"""The sampler's beat entry exists after migrate, and an operator's change to it is kept."""

from __future__ import annotations

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from history.schedule import SCHEDULE_NAME, ensure_default_schedule
from history.tasks import SAMPLE_TASK

pytestmark = pytest.mark.django_db


def test_default_schedule_created_at_migrate_and_left_to_the_operator():
    entry = PeriodicTask.objects.get(name=SCHEDULE_NAME)
    assert entry.task == SAMPLE_TASK and entry.enabled
    assert (entry.interval.every, entry.interval.period) == (30, IntervalSchedule.SECONDS)
    assert entry.expire_seconds == 30
    entry.interval = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.MINUTES)
    entry.enabled = False
    entry.save()
    ensure_default_schedule()
    entry.refresh_from_db()
    assert (entry.interval.every, entry.interval.period, entry.enabled) == (
        2,
        IntervalSchedule.MINUTES,
        False,
    )
