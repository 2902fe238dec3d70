"""Failure paths of the schedule list's Enable/Disable and Delete buttons, through Django's test
client on the real database: a schedule that does not exist (or is no report schedule), a viewer, a
forged request and a GET each get an answer that says why, refusals are audited, and no schedule
is changed or lost."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.models import AuditRecord

pytestmark = pytest.mark.django_db

SCHEDULE_FORM = {
    "name": "nightly",
    "report": "all",
    "window_hours": "24",
    "crontab": "0 3 * * *",
    "enabled": "on",
}


def _client(name: str, role: str, **options) -> Client:
    user = User.objects.create_user(name, password="not-used-here")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    client = Client(**options)
    client.force_login(user)
    return client


@pytest.fixture
def operator_client() -> Client:
    return _client("olga", "operator")


@pytest.fixture
def schedule(operator_client) -> PeriodicTask:
    """A report schedule made through the console's own form (as an operator makes one)."""
    assert operator_client.post(reverse("analytics:schedule_create"), SCHEDULE_FORM).status_code == 302
    AuditRecord.objects.all().delete()  # each test reads only the records its own requests wrote
    return PeriodicTask.objects.get(name="nightly")


def state(task: PeriodicTask) -> tuple:
    task.refresh_from_db()
    return (task.name, task.enabled, task.task, task.kwargs, task.crontab_id, task.interval_id)


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_a_missing_schedule_is_a_404_naming_it_and_others_are_untouched(operator_client, schedule, action):
    before = state(schedule)
    missing = schedule.pk + 1000
    response = operator_client.post(reverse(f"analytics:schedule_{action}", args=[missing]))
    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page and f"report schedule {missing} does not exist" in page
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.target) == (
        f"analytics.schedule.{action}",
        "failed",
        f"schedule {missing}",
    )
    assert state(schedule) == before


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_a_periodic_task_that_is_no_report_schedule_is_refused(operator_client, action):
    """The buttons act on report schedules only: another beat entry (here Celery's own clean-up
    task) named by its id is not found, and stays as it was."""
    every_day = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.DAYS)
    other = PeriodicTask.objects.create(name="cleanup", task="celery.backend_cleanup", interval=every_day)
    response = operator_client.post(reverse(f"analytics:schedule_{action}", args=[other.pk]))
    assert response.status_code == 404 and b"not a report schedule" in response.content
    assert state(other) == ("cleanup", True, "celery.backend_cleanup", "{}", None, every_day.pk)


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_a_viewer_is_refused_and_audited(schedule, action):
    viewer = _client("vera", "viewer")
    before = state(schedule)
    url = reverse(f"analytics:schedule_{action}", args=[schedule.pk])
    response = viewer.post(url)
    assert response.status_code == 403 and b"needs the operator role" in response.content
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.username, record.target) == (
        f"analytics.schedule.{action}",
        "denied",
        "vera",
        url,
    )
    assert state(schedule) == before


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_a_forged_request_or_a_get_changes_nothing(schedule, action):
    before = state(schedule)
    url = reverse(f"analytics:schedule_{action}", args=[schedule.pk])
    forged = _client("carl", "operator", enforce_csrf_checks=True).post(url)
    assert forged.status_code == 403 and b"CSRF" in forged.content
    assert _client("otto", "operator").get(url).status_code == 405
    assert state(schedule) == before
    assert not AuditRecord.objects.filter(result="ok").exists()


def test_the_buttons_work_on_the_same_schedule(operator_client, schedule):
    """The success path beside the refusals, so they refused an action that was possible."""
    assert operator_client.post(reverse("analytics:schedule_toggle", args=[schedule.pk])).status_code == 302
    assert state(schedule)[1] is False
    assert operator_client.post(reverse("analytics:schedule_delete", args=[schedule.pk])).status_code == 302
    assert not PeriodicTask.objects.filter(pk=schedule.pk).exists()
    results = list(AuditRecord.objects.order_by("pk").values_list("action", "result"))
    assert results == [("analytics.schedule.toggle", "ok"), ("analytics.schedule.delete", "ok")]
