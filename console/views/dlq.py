"""Dead-letter pages (W8): groups with dead letters, a group's list with filter and export,
inspect one, dry-run preview, replay (one now; selected or all as a Celery job)."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.common.topic_config import retry_topic
from console import replay_audit
from console.commands import dlq as commands
from console.commands import serves
from console.message_body import body_views
from console.models import ReplayJob
from console.queries import operations as queries
from console.services import dlq
from console.tasks import fail_abandoned_jobs
from console.views.common import cluster_of, export_messages, message_row, run
from core.errors import error_page
from core.roles import VIEWER, require_role

PAGE_SIZE = 100
FILTER_FIELDS = ("key", "tag", "begin", "end")
_filter_from = commands.dead_letter_filter
_check_group = commands.check_group


@require_GET
@require_role(VIEWER)
def dlq_groups(request):
    if wanted := request.GET.get("group", "").strip():  # "Open a group by name"
        return redirect("console:dlq_list", group=_check_group(wanted))
    groups = queries.dead_letter_groups(cluster_of(request))
    return render(request, "console/dlq_groups.html", {"groups": groups})


@require_GET
@require_role(VIEWER)
def dlq_list(request, group: str):
    _check_group(group)
    flt = _filter_from(request.GET)
    write_only = queries.write_only_brokers(cluster_of(request), group)
    if write_only:
        return render(request, "console/dlq_write_only.html", {"group": group, "brokers": write_only})
    located = queries.dead_letters(cluster_of(request), group, flt)
    page = Paginator(located, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [
        {**message_row(i.message, i.broker_name), "origin": dlq.original_topic(i.message)}
        for i in page.object_list
    ]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "group": group,
        "rows": rows,
        "page": page,
        "total": len(located),
        "query": query.urlencode(),
        "filter": {k: v for k, v in request.GET.items() if k in FILTER_FIELDS},
        "targets": dlq.TARGETS,
        "retry_topic": retry_topic(group),
    }
    template = (
        "console/_dlq_table.html"
        if request.htmx and request.htmx.target == "dlq-table"
        else "console/dlq_list.html"
    )
    return render(request, template, context)


@require_POST
@serves("dlq.make_readable")
def dlq_make_readable(request, group: str):
    run(request, "dlq.make_readable", commands.MakeReadable.parse(group))
    return redirect("console:dlq_list", group=group)


@require_GET
@require_role(VIEWER)
def dlq_export(request, group: str, fmt: str):
    _check_group(group)
    located = queries.dead_letters(cluster_of(request), group, _filter_from(request.GET))
    rows = [
        (i.message, i.broker_name, {"origin_topic": dlq.original_topic(i.message) or ""}) for i in located
    ]
    return export_messages(rows, fmt, f"dlq-{group}", ("origin_topic",))


@require_GET
@require_role(VIEWER)
def dlq_message(request, group: str, offset_msg_id: str):
    _check_group(group)
    try:
        (message,) = queries.find_dead_letters(cluster_of(request), group, [offset_msg_id])
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    context = {
        "group": group,
        "row": message_row(message),
        "body": body_views(message.body),
        "origin": dlq.original_topic(message),
        "targets": dlq.TARGETS,
        "retry_topic": retry_topic(group),
    }
    return render(request, "console/dlq_message.html", context)


def _selected_messages(request, group: str):
    """The dead letters a replay form names: ``scope`` one / selected / all (with the filter)."""
    scope = request.POST.get("scope", "selected")
    cluster = cluster_of(request)
    if scope == "all":
        return scope, [i.message for i in queries.dead_letters(cluster, group, _filter_from(request.POST))]
    ids = [i for i in request.POST.getlist("ids") if i.strip()]
    if not ids:
        raise BadRequest("select at least one dead letter (or choose to replay all)")
    if len(ids) > commands.MAX_SELECTED:
        raise BadRequest(
            f"at most {commands.MAX_SELECTED} messages can be selected; replay all with a filter instead"
        )
    try:
        return scope, queries.find_dead_letters(cluster, group, ids)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


@require_POST
@require_role(VIEWER)
def dlq_preview(request, group: str):
    """Dry run: what would be sent where. Reads only, so viewers may look too."""
    _check_group(group)
    target = commands.replay_target(request.POST)
    scope, messages = _selected_messages(request, group)
    steps = dlq.plan_replay(group, messages, target)
    context = {
        "group": group,
        "steps": steps,
        "scope": scope,
        "target": target,
        "ready": sum(1 for s in steps if not s.error),
        "blocked": sum(1 for s in steps if s.error),
    }
    return render(request, "console/_dlq_preview.html", context)


@require_POST
@serves(replay_audit.REPLAY)
def dlq_replay(request, group: str):
    """One dead letter now (the page says how it went), or a job for the selected ones or all."""
    outcome = run(request, replay_audit.REPLAY, commands.Replay.parse(group, request.POST))
    if isinstance(outcome.value, ReplayJob):
        job = outcome.value
        if outcome.failed:
            hint = "Check that the Celery broker (REDIS_URL) is reachable, then try again."
            return error_page(request, 503, "Replay not started", job.detail, hint)
        return redirect("console:replay_job", job_id=job.pk)
    if outcome.failed:
        raise BadRequest(f"replay failed: {outcome.detail}")
    return render(request, "console/dlq_replayed.html", {"group": group, "outcome": outcome.value})


@require_GET
@require_role(VIEWER)
def replay_job(request, job_id: int):
    fail_abandoned_jobs()  # a job whose worker stopped is shown failed, not running forever
    job = ReplayJob.objects.filter(pk=job_id).first()
    if job is None:
        raise Http404(f"replay job {job_id} does not exist")
    template = "console/_replay_job.html" if request.htmx else "console/replay_job.html"
    return render(request, template, {"job": job})


@require_GET
@require_role(VIEWER)
def replay_jobs(request):
    fail_abandoned_jobs()
    return render(request, "console/replay_jobs.html", {"jobs": ReplayJob.objects.all()[:100]})
