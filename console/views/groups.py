"""W3: consumer groups — list with lag, detail (per-queue progress and holder, clients and
subscriptions, config), create / update, delete, reset offset with preview, skip backlog."""

from __future__ import annotations

from django.core.exceptions import BadRequest, ValidationError
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.common.system_names import is_system_group
from console.commands import groups, serves
from console.commands.parsing import form_errors_text
from console.forms import ResetOffsetForm, check_group
from console.queries import groups as queries
from console.queries import topology
from console.views.common import cluster_of, perform
from core.roles import VIEWER, require_role

PAGE_SIZE = 100


@require_GET
@require_role(VIEWER)
def group_list(request):
    """Names are filtered and paged first; lag, clients and TPS are then asked for the groups of
    the page only, so the page costs the same with 30 groups or 3,000."""
    cluster = cluster_of(request)
    query = request.GET.get("q", "").strip()
    show_system = request.GET.get("system") == "1"
    index = queries.index(cluster)
    shown = [
        name
        for name in index.names
        if (show_system or not is_system_group(name)) and (not query or query.lower() in name.lower())
    ]
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = queries.rows(cluster, index, list(page.object_list))
    layout = topology.layout(cluster)
    context = {
        "page": page,
        "rows": rows,
        "total": len(index.names),
        "query": query,
        "show_system": show_system,
        "page_lag": sum(r.lag for r in rows),
        "page_online": sum(1 for r in rows if r.clients),
        "clusters": layout.clusters,
        "masters": layout.masters,
    }
    partial = request.htmx and not request.htmx.boosted
    return render(request, "console/_group_table.html" if partial else "console/groups.html", context)


@require_GET
@require_role(VIEWER)
def group_page(request, group: str):
    cluster = cluster_of(request)
    detail = queries.detail(cluster, group)
    layout = topology.layout(cluster)
    config = next(iter(detail.configs.values()), None)
    context = {
        "group": group,
        "detail": detail,
        "config": config,
        "queues": [
            (q, detail.queue_clients.get((q.topic, q.broker_name, q.queue_id), ""))
            for q in (detail.progress.queues if detail.progress else [])
        ],
        "clusters": layout.clusters,
        "masters": layout.masters,
        "reset_form": ResetOffsetForm(),
    }
    return render(request, "console/group_detail.html", context)


@require_POST
@serves("group.save")
def group_save(request):
    outcome = perform(request, "group.save", groups.SaveGroup.parse(request.POST))
    return redirect("console:group", group=outcome.target) if outcome else redirect("console:groups")


@require_POST
@serves("group.delete")
def group_delete(request, group: str):
    """Delete the group's config (and its offsets) from every master that has it."""
    outcome = perform(request, "group.delete", groups.DeleteGroup(group))
    return redirect("console:groups") if outcome else redirect("console:group", group=group)


@require_GET
@require_role(VIEWER)
def reset_preview_page(request, group: str):
    """What a reset would do, per queue, before anyone applies it (read-only)."""
    try:
        group = check_group(group)
    except ValidationError as exc:
        raise BadRequest(f"Invalid group: {' '.join(exc.messages)}") from None
    form = ResetOffsetForm(request.GET)
    if not form.is_valid():
        raise BadRequest(f"Invalid input: {form_errors_text(form)}")
    timestamp = form.target_millis()
    rows = queries.preview_reset(cluster_of(request), group, form.cleaned_data["topic"], timestamp)
    context = {
        "group": group,
        "topic": form.cleaned_data["topic"],
        "mode": form.cleaned_data["mode"],
        "timestamp_text": request.GET.get("timestamp", ""),
        "rows": rows,
        "skipped": sum(r.change for r in rows if r.change and r.change > 0),
        "replayed": -sum(r.change for r in rows if r.change and r.change < 0),
    }
    template = "console/_reset_preview.html" if request.htmx else "console/reset_preview.html"
    return render(request, template, context)


@require_POST
@serves("group.reset_offset")
def reset_apply(request, group: str):
    perform(request, "group.reset_offset", groups.ResetOffset.parse(group, request.POST), missing_is_404=True)
    return redirect("console:group", group=group)


@require_POST
@serves("group.skip_backlog")
def skip_backlog(request, group: str):
    """Move every topic of the group to its latest offset: the backlog is skipped, never consumed."""
    perform(request, "group.skip_backlog", groups.SkipBacklog.parse(group), missing_is_404=True)
    return redirect("console:group", group=group)
