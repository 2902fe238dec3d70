"""Dead-letter pages (W8): groups with dead letters, a group's list with filter and export,
inspect one, dry-run preview, replay (one now; selected or all as a Celery job)."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import MQClientError
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX, dlq_topic, retry_topic, validate_topic
from console import replay_audit
from console.message_body import body_views
from console.models import ReplayJob
from console.services import dlq
from console.tasks import fail_abandoned_jobs, replay_dead_letters
from console.views.common import (
    audited,
    export_messages,
    message_row,
    parse_datetime_ms,
    parse_float,
)
from core.audit import audit
from core.cluster_access import admin_of, namesrv_of, producer_of
from core.errors import error_page
from core.models import AuditRecord
from core.roles import VIEWER, require_permission, require_role

MAX_SELECTED = 10_000
PAGE_SIZE = 100
FILTER_FIELDS = ("key", "tag", "begin", "end")
MAX_RATE = 10_000


def _filter_from(params) -> dlq.DeadLetterFilter:
    return dlq.DeadLetterFilter(
        key=(params.get("key") or "").strip(),
        tag=(params.get("tag") or "").strip(),
        begin_ms=parse_datetime_ms(params.get("begin"), "from"),
        end_ms=parse_datetime_ms(params.get("end"), "to"),
    )


def _check_group(group: str) -> str:
    problem = validate_topic(dlq_topic(group))
    if problem:
        raise BadRequest(f"bad consumer group name: {problem}")
    return group


@require_GET
@require_role(VIEWER)
def dlq_groups(request):
    if wanted := request.GET.get("group", "").strip():  # "Open a group by name"
        return redirect("console:dlq_list", group=_check_group(wanted))
    admin = admin_of(request)
    groups = []
    for topic in admin.topic_list():
        if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            status = admin.topic_status(topic)
            count = sum(q.max_offset - q.min_offset for q in status.queues)
            groups.append({"group": topic[len(DLQ_GROUP_TOPIC_PREFIX) :], "count": count})
    return render(request, "console/dlq_groups.html", {"groups": groups})


@require_GET
@require_role(VIEWER)
def dlq_list(request, group: str):
    _check_group(group)
    flt = _filter_from(request.GET)
    write_only = dlq.write_only_brokers(admin_of(request), group)
    if write_only:
        return render(request, "console/dlq_write_only.html", {"group": group, "brokers": write_only})
    located = dlq.list_dead_letters(admin_of(request), group, flt)
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
@require_permission("dlq.make_readable")
@audited("dlq.make_readable")
def dlq_make_readable(request, group: str):
    _check_group(group)
    try:
        changed = dlq.make_readable(admin_of(request), group)
    except MQClientError as exc:
        audit(request, "dlq.make_readable", dlq_topic(group), {}, AuditRecord.RESULT_FAILED, str(exc))
        raise
    audit(
        request,
        "dlq.make_readable",
        dlq_topic(group),
        {"brokers": changed},
        detail="perm set to 6 (read+write)",
    )
    return redirect("console:dlq_list", group=group)


@require_GET
@require_role(VIEWER)
def dlq_export(request, group: str, fmt: str):
    _check_group(group)
    located = dlq.list_dead_letters(admin_of(request), group, _filter_from(request.GET))
    rows = [
        (i.message, i.broker_name, {"origin_topic": dlq.original_topic(i.message) or ""}) for i in located
    ]
    return export_messages(rows, fmt, f"dlq-{group}", ("origin_topic",))


@require_GET
@require_role(VIEWER)
def dlq_message(request, group: str, offset_msg_id: str):
    _check_group(group)
    try:
        (message,) = dlq.find_dead_letters(admin_of(request), group, [offset_msg_id])
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
    admin = admin_of(request)
    if scope == "all":
        return scope, [i.message for i in dlq.list_dead_letters(admin, group, _filter_from(request.POST))]
    ids = [i for i in request.POST.getlist("ids") if i.strip()]
    if not ids:
        raise BadRequest("select at least one dead letter (or choose to replay all)")
    if len(ids) > MAX_SELECTED:
        raise BadRequest(f"at most {MAX_SELECTED} messages can be selected; replay all with a filter instead")
    try:
        return scope, dlq.find_dead_letters(admin, group, ids)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _target(request) -> str:
    target = request.POST.get("target", dlq.TARGET_ORIGINAL)
    if target not in dlq.TARGETS:
        raise BadRequest(f"replay target must be one of {', '.join(dlq.TARGETS)}")
    return target


@require_POST
@require_role(VIEWER)
def dlq_preview(request, group: str):
    """Dry run: what would be sent where. Reads only, so viewers may look too."""
    _check_group(group)
    target = _target(request)
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
@require_permission("dlq.replay")
@audited(replay_audit.REPLAY)
def dlq_replay(request, group: str):
    _check_group(group)
    target = _target(request)
    rate = parse_float(request.POST.get("rate"), "rate (messages per second)", 0, MAX_RATE)
    scope = request.POST.get("scope", "selected")
    if scope == "one":
        return _replay_one(request, group, target)
    if scope not in ("selected", "all"):
        raise BadRequest("scope must be one, selected or all")
    job = ReplayJob.objects.create(
        user=request.user,
        namesrv=namesrv_of(request),
        group=group,
        target=target,
        rate_per_second=rate,
        message_ids=[i for i in request.POST.getlist("ids") if i.strip()] if scope == "selected" else [],
        filters=_filter_fields(request.POST) if scope == "all" else {},
    )
    if scope == "selected" and not job.message_ids:
        job.delete()
        raise BadRequest("select at least one dead letter (or choose to replay all)")
    if len(job.message_ids) > MAX_SELECTED:
        job.delete()
        raise BadRequest(f"at most {MAX_SELECTED} messages can be selected; replay all with a filter instead")
    try:
        replay_dead_letters.delay(job.pk)
    except Exception as exc:  # the task queue (Redis) is down: say so, keep the job as failed
        job.status, job.detail = ReplayJob.STATUS_FAILED, f"could not queue the job: {exc}"
        job.save(update_fields=["status", "detail"])
        failed = AuditRecord.RESULT_FAILED
        audit(request, replay_audit.REPLAY, dlq_topic(group), {"job": job.pk}, failed, job.detail)
        hint = "Check that the Celery broker (REDIS_URL) is reachable, then try again."
        return error_page(request, 503, "Replay not started", job.detail, hint)
    audit(
        request,
        replay_audit.REPLAY,
        dlq_topic(group),
        {
            "scope": scope,
            "target": target,
            "rate": rate,
            "job": job.pk,
            "count": len(job.message_ids) or None,
            "filter": job.filters,
        },
        detail=f"replay job {job.pk} queued",
    )
    return redirect("console:replay_job", job_id=job.pk)


def _filter_fields(params) -> dict:
    flt = _filter_from(params)
    return {"key": flt.key, "tag": flt.tag, "begin_ms": flt.begin_ms, "end_ms": flt.end_ms}


def _replay_one(request, group: str, target: str):
    offset_msg_id = (request.POST.get("ids") or "").strip()
    if not offset_msg_id:
        raise BadRequest("name the dead letter to replay")
    try:
        messages = dlq.find_dead_letters(admin_of(request), group, [offset_msg_id])
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    (outcome,) = list(dlq.replay(producer_of(request), group, messages, target))
    fields = replay_audit.outcome_fields(outcome, scope="one", target=target)
    audit(request, replay_audit.REPLAY, dlq_topic(group), **fields)
    if outcome.error:
        raise BadRequest(f"replay failed: {outcome.error}")
    context = {"group": group, "outcome": outcome}
    return render(request, "console/dlq_replayed.html", context)


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
