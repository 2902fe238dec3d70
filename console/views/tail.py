"""The live-tail page (W9) and the user's saved tail filters.

Saving or deleting a filter from the page (htmx) answers with the new list and leaves the page, its
rows and its socket alone; without JavaScript the answer is a redirect to the tail with the filter
applied.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from broker.common.topic_config import validate_topic
from console.commands import serves
from console.commands import tail as commands
from console.commands.tail import FILTER_FIELDS
from console.models import SavedTailFilter
from console.tail.consumer import BUFFER_SIZE
from console.views.common import run
from core.boundary import Missing
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def tail_page(request):
    topic = (request.GET.get("topic") or "").strip()
    problem = validate_topic(topic) if topic else None
    topic = topic if not problem else ""
    context = {
        "topic": topic,
        "problem": problem,
        "saved": _saved_filters(request.user, topic),
        "buffer_size": BUFFER_SIZE,
        "initial": {k: request.GET.get(k, "") for k in FILTER_FIELDS},
    }
    return render(request, "console/tail.html", context, status=400 if problem else 200)


@require_POST
@serves("tail.filter.save")
def save_tail_filter(request):
    outcome = run(request, "tail.filter.save", commands.SaveTailFilter.parse(request.POST))
    fields = outcome.parameters
    if request.htmx:
        context = {"name": outcome.target, "created": outcome.detail == "created", "topic": fields["topic"]}
        context["saved"] = _saved_filters(request.user, fields["topic"])
        return render(request, "console/_tail_filter_saved.html", context)
    return redirect(tail_url(fields["topic"], fields))


@require_POST
@serves("tail.filter.delete")
def delete_tail_filter(request, filter_id: int):
    try:
        run(request, "tail.filter.delete", commands.DeleteTailFilter(filter_id))
    except Missing as exc:  # another user's filter, or one deleted meanwhile
        raise Http404(exc.reason) from None
    topic = (request.POST.get("topic") or "").strip()
    topic = "" if validate_topic(topic) else topic
    if request.htmx:
        context = {"topic": topic, "saved": _saved_filters(request.user, topic)}
        return render(request, "console/_tail_saved_filters.html", context)
    return redirect(tail_url(topic, {}))


def tail_url(topic: str, fields: dict) -> str:
    """The tail page on ``topic`` with a filter applied from the start (its fields, as saved)."""
    query = {"topic": topic, **{k: fields[k] for k in FILTER_FIELDS if fields.get(k)}}
    return f"{reverse('console:tail')}?{urlencode(query)}" if topic else reverse("console:tail")


def _saved_filters(user, topic: str) -> list[dict]:
    """The user's saved filters, each with the link that applies it: on its own topic, or on the
    topic tailed now for a filter saved for any topic."""
    return [
        {"filter": f, "url": tail_url(f.topic or topic, {k: getattr(f, k) for k in FILTER_FIELDS})}
        for f in SavedTailFilter.objects.filter(user=user)
    ]
