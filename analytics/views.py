"""Analytics pages (W12): runs, a run's charts and tables, downloads, the schedule editor.

Reading needs the viewer role (a login without a role is not enough); starting a run or changing a
schedule needs the operator role, and each such action leaves an audit record.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_celery_beat.models import PeriodicTask

from core.public import VIEWER, AuditRecord, audit, require_permission, require_role

from . import charts
from .forms import RunForm, ScheduleForm
from .models import ReportRun
from .presentation import SECTION_TITLES, schedule_summary, section_table
from .runner import fail_abandoned_runs
from .spark import archive_input
from .spark.catalog import REPORT_SECTIONS
from .tasks import RUN_SCHEDULED_REPORT, run_report

DOWNLOAD_FORMATS = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet"}


@require_role(VIEWER)
@require_GET
def run_list(request):
    fail_abandoned_runs()
    runs = ReportRun.objects.all()[:200]
    context = {"runs": runs, **_archive_context()}
    return render(request, "analytics/run_list.html", context)


def _archive_context() -> dict:
    """The configured archive as the pages show it: what it holds, or what to do when empty."""
    uri = settings.ANALYTICS_ARCHIVE_URI
    return {
        "archive_uri": uri,
        "archive": archive_input.contents(uri),
        "archive_help": archive_input.WHAT_TO_DO,
    }


@require_permission("analytics.run.start")
@require_http_methods(["GET", "POST"])
def run_start(request):
    form = RunForm(request.POST or None)
    if request.method == "POST":
        if not form.is_valid():
            audit(request, "analytics.run.start", parameters=_printable(request.POST),
                  result=AuditRecord.RESULT_FAILED, detail=form.errors.as_text())  # fmt: skip
            context = {"form": form, **_archive_context()}
            return render(request, "analytics/run_form.html", context, status=400)
        data = form.cleaned_data
        try:
            archive_input.require_segments(data["input_uri"])
        except archive_input.NoArchivedSegments as exc:
            # Refused before a worker spends a Spark session on an input that holds nothing.
            audit(request, "analytics.run.start", parameters=_printable(request.POST),
                  result=AuditRecord.RESULT_FAILED, detail=str(exc))  # fmt: skip
            context = {"form": form, "empty_input": data["input_uri"], **_archive_context()}
            return render(request, "analytics/run_form.html", context, status=400)
        run = ReportRun.objects.create(
            report=data["report"], start_time=data["start_time"], end_time=data["end_time"],
            topics=data["topics"], input_uri=data["input_uri"], requested_by=request.user.get_username(),
        )  # fmt: skip
        try:
            result = run_report.delay(run.pk)
        except Exception as exc:  # the Celery transport is down: the run cannot start, say why
            reason = f"could not queue the report task: {type(exc).__name__}: {exc}"
            ReportRun.objects.filter(pk=run.pk).update(
                status=ReportRun.FAILED, stage="failed", error=reason, finished_at=timezone.now()
            )
            audit(request, "analytics.run.start", target=f"run {run.pk}", parameters=_printable(request.POST),
                  result=AuditRecord.RESULT_FAILED, detail=reason)  # fmt: skip
            return redirect("analytics:run_detail", run_id=run.pk)
        ReportRun.objects.filter(pk=run.pk).update(celery_task_id=result.id or "")
        audit(request, "analytics.run.start", target=f"run {run.pk}", parameters=_printable(request.POST))
        return redirect("analytics:run_detail", run_id=run.pk)
    return render(request, "analytics/run_form.html", {"form": form, **_archive_context()})


@require_role(VIEWER)
@require_GET
def run_detail(request, run_id: int):
    fail_abandoned_runs()
    run = get_object_or_404(ReportRun, pk=run_id)
    return render(request, "analytics/run_detail.html", _run_context(run))


@require_role(VIEWER)
@require_GET
def run_status(request, run_id: int):
    """The live part of a run's page (polled by htmx until the run is finished)."""
    fail_abandoned_runs()
    run = get_object_or_404(ReportRun, pk=run_id)
    response = render(request, "analytics/_run_status.html", _run_context(run))
    if run.finished and request.headers.get("HX-Request"):
        response["HX-Refresh"] = "true"  # swap in the charts and tables once, then stop polling
    return response


def _run_context(run: ReportRun) -> dict:
    sections = {}
    if run.status == ReportRun.DONE:
        for name in ("inputs", *REPORT_SECTIONS.get(run.report, ())):
            header, body = section_table(run.rows(name))
            sections[name] = {"title": SECTION_TITLES.get(name, name), "header": header, "body": body,
                              "formats": sorted(run.output_files.get(name, {}))}  # fmt: skip
    return {"run": run, "sections": sections, "charts": charts.available_charts(run) if sections else []}


@require_role(VIEWER)
@require_GET
def run_chart(request, run_id: int, name: str):
    run = get_object_or_404(ReportRun, pk=run_id, status=ReportRun.DONE)
    if name not in charts.available_charts(run):
        raise Http404(f"run {run_id} has no {name} chart")
    return HttpResponse(charts.CHARTS[name][1](run), content_type="image/png")


@require_role(VIEWER)
@require_GET
def run_download(request, run_id: int, section: str, fmt: str):
    run = get_object_or_404(ReportRun, pk=run_id, status=ReportRun.DONE)
    path = run.output_files.get(section, {}).get(fmt)
    if fmt not in DOWNLOAD_FORMATS or not path:
        raise Http404(f"run {run_id} has no {section}.{fmt}")
    file = Path(path)
    reports_dir = Path(settings.ANALYTICS_REPORTS_DIR).resolve()
    if reports_dir not in file.resolve().parents or not file.is_file():
        raise Http404(f"{section}.{fmt} of run {run_id} is no longer on disk")
    return FileResponse(open(file, "rb"), as_attachment=True, filename=f"run-{run_id}-{section}.{fmt}",
                        content_type=DOWNLOAD_FORMATS[fmt])  # fmt: skip


# -- schedules ----------------------------------------------------------------------------------
def _schedules():
    return PeriodicTask.objects.filter(task=RUN_SCHEDULED_REPORT).select_related("interval", "crontab")


@require_role(VIEWER)
@require_GET
def schedule_list(request):
    return render(
        request,
        "analytics/schedule_list.html",
        {"schedules": [(task, schedule_summary(task.kwargs)) for task in _schedules().order_by("name")]},
    )


@require_permission("analytics.schedule.create")
@require_http_methods(["GET", "POST"])
def schedule_create(request):
    return _schedule_form(request, None, "analytics.schedule.create")


@require_permission("analytics.schedule.update")
@require_http_methods(["GET", "POST"])
def schedule_edit(request, schedule_id: int):
    task = _schedules().filter(pk=schedule_id).first()
    if task is None:
        _schedule_not_found(request, "analytics.schedule.update", schedule_id)
    return _schedule_form(request, task, "analytics.schedule.update")


def _schedule_form(request, task: PeriodicTask | None, action: str) -> HttpResponse:
    initial = ScheduleForm.initial_from(task) if task else None
    form = ScheduleForm(request.POST or None, instance=task, initial=initial)
    if request.method == "POST":
        if not form.is_valid():
            audit(request, action, target=task.name if task else "", parameters=_printable(request.POST),
                  result=AuditRecord.RESULT_FAILED, detail=form.errors.as_text())  # fmt: skip
            return render(request, "analytics/schedule_form.html", {"form": form, "task": task}, status=400)
        saved = form.save()
        audit(request, action, target=saved.name, parameters=_printable(request.POST))
        return redirect("analytics:schedule_list")
    return render(request, "analytics/schedule_form.html", {"form": form, "task": task})


@require_permission("analytics.schedule.toggle")
@require_POST
def schedule_toggle(request, schedule_id: int):
    task = _schedules().filter(pk=schedule_id).first()
    if task is None:
        _schedule_not_found(request, "analytics.schedule.toggle", schedule_id)
    task.enabled = not task.enabled
    task.save(update_fields=["enabled"])
    # One action name for the button, refused or done; what it did is the detail.
    audit(
        request,
        "analytics.schedule.toggle",
        target=task.name,
        detail="enabled" if task.enabled else "disabled",
    )
    return redirect("analytics:schedule_list")


@require_permission("analytics.schedule.delete")
@require_POST
def schedule_delete(request, schedule_id: int):
    task = _schedules().filter(pk=schedule_id).first()
    if task is None:
        _schedule_not_found(request, "analytics.schedule.delete", schedule_id)
    name = task.name
    task.delete()
    audit(request, "analytics.schedule.delete", target=name)
    return redirect("analytics:schedule_list")


def _schedule_not_found(request, action: str, schedule_id: int) -> NoReturn:
    """A 404 that names the missing schedule, audited as failed: a stale page's button, or a
    periodic task that is not a report schedule."""
    reason = f"report schedule {schedule_id} does not exist (deleted, or not a report schedule)"
    audit(request, action, target=f"schedule {schedule_id}", result=AuditRecord.RESULT_FAILED, detail=reason)
    raise Http404(reason)


def _printable(post) -> dict:
    return {key: value for key, value in post.items() if key != "csrfmiddlewaretoken"}
