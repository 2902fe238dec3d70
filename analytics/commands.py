"""Report commands (operators): start a run, create / update / enable-disable / delete a schedule.
Each runs through the one boundary (``core.boundary``): the role check and the one audit record. A
rejected form is an ``Invalid`` carrying the bound form for the page to show again (400)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from core.boundary import Actor, Cluster, Invalid, Missing, Outcome, Params, command
from core.command_line import by_id, form_fields, register

from .forms import RunForm, ScheduleForm
from .models import ReportRun
from .spark import archive_input
from .tasks import RUN_SCHEDULED_REPORT, run_report


def printable(data) -> dict:
    return {key: value for key, value in data.items() if key != "csrfmiddlewaretoken"}


def schedules():
    """The periodic tasks that are report schedules."""
    return PeriodicTask.objects.filter(task=RUN_SCHEDULED_REPORT).select_related("interval", "crontab")


def existing_schedule(schedule_id: int) -> PeriodicTask:
    """A stale page's button, or a periodic task that is not a report schedule: ``Missing``."""
    task = schedules().filter(pk=schedule_id).first()
    if task is None:
        reason = f"report schedule {schedule_id} does not exist (deleted, or not a report schedule)"
        raise Missing(f"schedule {schedule_id}", reason)
    return task


class EmptyInput(Invalid):
    """The input holds no archived segments: refused before a worker spends a Spark session on it."""


@dataclass(frozen=True)
class StartRun(Params):
    data: Any = field(default_factory=dict)  # the submitted form

    def audit_parameters(self) -> dict[str, Any]:
        return printable(self.data)


@command("analytics.run.start")
def start_run(actor: Actor, cluster: Cluster, params: StartRun) -> Outcome:
    """A run queued for the Celery worker; when the queue is down the run is kept, failed, saying why."""
    form = RunForm(params.data)
    fields = printable(params.data)
    if not form.is_valid():
        errors = form.errors.as_text()
        raise Invalid(errors, parameters=fields, detail=errors, form=form)
    data = form.cleaned_data
    try:
        archive_input.require_segments(data["input_uri"])
    except archive_input.NoArchivedSegments as exc:
        raise EmptyInput(str(exc), parameters=fields, detail=str(exc), form=form) from None
    run = ReportRun.objects.create(
        report=data["report"], start_time=data["start_time"], end_time=data["end_time"],
        topics=data["topics"], input_uri=data["input_uri"], requested_by=actor.username,
    )  # fmt: skip
    try:
        result = run_report.delay(run.pk)
    except Exception as exc:  # the Celery transport is down: the run cannot start, say why
        reason = f"could not queue the report task: {type(exc).__name__}: {exc}"
        ReportRun.objects.filter(pk=run.pk).update(
            status=ReportRun.FAILED, stage="failed", error=reason, finished_at=timezone.now()
        )
        return Outcome(f"run {run.pk}", reason, fields, run, failed=True)
    ReportRun.objects.filter(pk=run.pk).update(celery_task_id=result.id or "")
    return Outcome(f"run {run.pk}", "", fields, run)


@dataclass(frozen=True)
class SaveSchedule(Params):
    schedule_id: int | None  # None: a new schedule
    data: Any = field(default_factory=dict)


def _save_schedule(params: SaveSchedule) -> Outcome:
    task = None if params.schedule_id is None else existing_schedule(params.schedule_id)
    initial = ScheduleForm.initial_from(task) if task else None
    form = ScheduleForm(params.data, instance=task, initial=initial)
    fields = printable(params.data)
    if not form.is_valid():
        errors = form.errors.as_text()
        raise Invalid(errors, target=task.name if task else "", parameters=fields, detail=errors, form=form)
    saved = form.save()
    return Outcome(saved.name, "", fields, saved)


@command("analytics.schedule.create")
def create_schedule(actor: Actor, cluster: Cluster, params: SaveSchedule) -> Outcome:
    return _save_schedule(params)


@command("analytics.schedule.update")
def update_schedule(actor: Actor, cluster: Cluster, params: SaveSchedule) -> Outcome:
    return _save_schedule(params)


@dataclass(frozen=True)
class ScheduleAction(Params):
    schedule_id: int


@command("analytics.schedule.toggle")
def toggle_schedule(actor: Actor, cluster: Cluster, params: ScheduleAction) -> Outcome:
    """One action name for the button, refused or done; what it did is the detail."""
    task = existing_schedule(params.schedule_id)
    task.enabled = not task.enabled
    task.save(update_fields=["enabled"])
    return Outcome(task.name, "enabled" if task.enabled else "disabled", {}, task)


@command("analytics.schedule.delete")
def delete_schedule(actor: Actor, cluster: Cluster, params: ScheduleAction) -> Outcome:
    task = existing_schedule(params.schedule_id)
    name = task.name
    task.delete()
    return Outcome(name)


# The command-line forms (``manage.py console_command``): the id the schedule pages take from their
# URLs is a field; the rest are the page forms' fields, judged by the forms inside the commands (a
# field left out of a new run or schedule takes the value its page shows filled in).
register("analytics.run.start", StartRun, form_fields(RunForm), defaults=RunForm)
register(
    "analytics.schedule.create",
    lambda f: SaveSchedule(None, f),
    form_fields(ScheduleForm),
    defaults=ScheduleForm,
)
register(
    "analytics.schedule.update",
    by_id("schedule_id", SaveSchedule),
    ("schedule_id", *form_fields(ScheduleForm)),
)
for action in ("analytics.schedule.toggle", "analytics.schedule.delete"):
    register(action, by_id("schedule_id", lambda pk, _: ScheduleAction(pk)), ("schedule_id",))
