"""Analytics pages (W12): runs, a run's charts and tables, downloads, the schedule editor.

Reading needs the viewer role (a login without a role is not enough); starting a run or changing a
schedule needs the operator role, and each such action leaves an audit record.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.boundary import Invalid, found, run_local, serves
from core.public import VIEWER, require_role

from . import charts, commands
from .forms import RunForm, ScheduleForm
from .models import ReportRun
from .presentation import SECTION_TITLES, schedule_summary, section_table
from .runner import fail_abandoned_runs
from .spark import archive_input
from .spark.catalog import REPORT_SECTIONS

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


@serves("analytics.run.start")
@require_http_methods(["GET", "POST"])
def run_start(request):
    if request.method != "POST":
        return render(request, "analytics/run_form.html", {"form": RunForm(), **_archive_context()})
    try:
        outcome = run_local(request, "analytics.run.start", commands.StartRun(request.POST))
    except commands.EmptyInput as exc:
        context = {"form": exc.form, "empty_input": exc.form.cleaned_data["input_uri"], **_archive_context()}
        return render(request, "analytics/run_form.html", context, status=400)
    except Invalid as exc:
        return render(
            request, "analytics/run_form.html", {"form": exc.form, **_archive_context()}, status=400
        )
    return redirect("analytics:run_detail", run_id=outcome.value.pk)


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
@require_role(VIEWER)
@require_GET
def schedule_list(request):
    return render(
        request,
        "analytics/schedule_list.html",
        {
            "schedules": [
                (task, schedule_summary(task.kwargs)) for task in commands.schedules().order_by("name")
            ]
        },
    )


@serves("analytics.schedule.create")
@require_http_methods(["GET", "POST"])
def schedule_create(request):
    return _schedule_form(request, None, "analytics.schedule.create")


@serves("analytics.schedule.update")
@require_http_methods(["GET", "POST"])
def schedule_edit(request, schedule_id: int):
    return _schedule_form(request, schedule_id, "analytics.schedule.update")


def _schedule_form(request, schedule_id: int | None, action: str) -> HttpResponse:
    if request.method != "POST":
        task = None if schedule_id is None else found(lambda: commands.existing_schedule(schedule_id))
        form = ScheduleForm(instance=task, initial=ScheduleForm.initial_from(task) if task else None)
        return render(request, "analytics/schedule_form.html", {"form": form, "task": task})
    try:
        run_local(request, action, commands.SaveSchedule(schedule_id, request.POST))
    except Invalid as exc:
        task = exc.form.instance if schedule_id is not None else None
        return render(request, "analytics/schedule_form.html", {"form": exc.form, "task": task}, status=400)
    return redirect("analytics:schedule_list")


@serves("analytics.schedule.toggle")
@require_POST
def schedule_toggle(request, schedule_id: int):
    run_local(request, "analytics.schedule.toggle", commands.ScheduleAction(schedule_id))
    return redirect("analytics:schedule_list")


@serves("analytics.schedule.delete")
@require_POST
def schedule_delete(request, schedule_id: int):
    run_local(request, "analytics.schedule.delete", commands.ScheduleAction(schedule_id))
    return redirect("analytics:schedule_list")
