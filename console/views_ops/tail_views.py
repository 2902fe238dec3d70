"""The live-tail page (W9) and the user's saved tail filters."""

from __future__ import annotations

from django.db import IntegrityError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from broker.common.topic_config import validate_topic
from console.models import SavedTailFilter
from console.roles import OPERATOR, VIEWER, require_role
from console.tail.filters import TailFilterError, compile_filter

from .common import BadRequest, audited, cluster_errors, record

BUFFER_SIZE = 500


@require_GET
@require_role(VIEWER)
def tail_page(request):
    topic = (request.GET.get("topic") or "").strip()
    problem = validate_topic(topic) if topic else None
    context = {
        "topic": topic if not problem else "",
        "problem": problem,
        "saved": SavedTailFilter.objects.filter(user=request.user),
        "buffer_size": BUFFER_SIZE,
        "initial": {k: request.GET.get(k, "") for k in ("tags", "sql", "key")},
    }
    return render(request, "console_ops/tail.html", context, status=400 if problem else 200)


@require_POST
@require_role(OPERATOR)
@cluster_errors
@audited("tail.filter.save")
def save_tail_filter(request):
    name = (request.POST.get("name") or "").strip()
    if not name or len(name) > 80:
        raise BadRequest("give the filter a name of 1 to 80 characters")
    fields = {k: (request.POST.get(k) or "").strip() for k in ("topic", "tags", "sql", "key")}
    try:
        compile_filter(fields["tags"], fields["sql"], fields["key"])
    except TailFilterError as exc:
        raise BadRequest(str(exc)) from None
    try:
        saved, created = SavedTailFilter.objects.update_or_create(
            user=request.user, name=name, defaults=fields
        )
    except IntegrityError as exc:
        raise BadRequest(f"cannot save the filter: {exc}") from None
    record(request, "tail.filter.save", name, fields, detail="created" if created else "updated")
    return redirect(f"{_tail_url()}?topic={fields['topic']}&filter={saved.pk}")


@require_POST
@require_role(OPERATOR)
def delete_tail_filter(request, filter_id: int):
    deleted, _ = SavedTailFilter.objects.filter(user=request.user, pk=filter_id).delete()
    result = "ok" if deleted else "failed"
    record(
        request,
        "tail.filter.delete",
        str(filter_id),
        {},
        result,
        "" if deleted else "no such filter of yours",
    )
    return redirect(_tail_url())


def _tail_url() -> str:
    return reverse("console_ops:tail")
