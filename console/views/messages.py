"""W5 + W14: message queries (topic + time range, key, id), export, detail with body views and
per-group consumption, resend to one consumer (consume-message-directly)."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console.commands import messages, serves
from console.commands.parsing import form_errors_text
from console.forms import IdQueryForm, KeyQueryForm, TopicTimeQueryForm
from console.message_body import body_views
from console.message_export import EXPORT_FORMATS, export_response
from console.queries import messages as queries
from console.views.common import cluster_of, perform
from core.roles import VIEWER, require_role

MODES = {"time": TopicTimeQueryForm, "key": KeyQueryForm, "id": IdQueryForm}
PAGE_SIZE = 100


@require_GET
@require_role(VIEWER)
def message_search(request):
    mode = request.GET.get("mode", "time")
    if mode not in MODES:
        raise BadRequest(f"unknown query mode {mode!r}; use time, key or id")
    export = request.GET.get("export", "")
    if export and export not in EXPORT_FORMATS:
        raise BadRequest(f"unknown export format {export!r}; use csv or json")
    searched = any(name in request.GET for name in ("topic", "key", "msg_id"))
    form = MODES[mode](request.GET if searched else None)
    context = {"mode": mode, "form": form, "searched": searched, "result": None}
    if searched:
        if not form.is_valid():
            raise BadRequest(f"Invalid query: {form_errors_text(form)}")
        result = queries.search(cluster_of(request), mode, form.cleaned_data)
        if export:
            name = form.cleaned_data.get("topic") or form.cleaned_data.get("msg_id") or "messages"
            return export_response(result.views, export, f"{name}-{mode}")
        context["result"] = result
        context["page"] = Paginator(result.views, PAGE_SIZE).get_page(request.GET.get("page"))
        query = request.GET.copy()
        query.pop("export", None)
        query.pop("page", None)
        context["export_query"] = query.urlencode()
    return render(request, "console/messages.html", context)


@require_GET
@require_role(VIEWER)
def message_detail(request, msg_id: str):
    form = IdQueryForm({"msg_id": msg_id, "topic": request.GET.get("topic", "")})
    if not form.is_valid():
        raise BadRequest(f"Invalid message id: {form_errors_text(form)}")
    detail = queries.message_detail(cluster_of(request), form.cleaned_data["msg_id"])
    tracks = detail.tracks
    context = {
        "m": detail.view,
        "body": body_views(detail.message.body),
        "tracks": tracks,
        "resend_targets": [(t.group, c) for t in tracks for c in t.clients],
    }
    return render(request, "console/message_detail.html", context)


@require_POST
@serves("message.resend")
def message_resend(request, msg_id: str):
    """Hand the stored message to one online consumer of a group again (``console.commands.messages``)."""
    params = messages.Resend.parse(msg_id, request.POST)
    perform(request, "message.resend", params)
    offset_id = params.offset_msg_id if isinstance(params, messages.Resend) else msg_id
    return redirect(reverse("console:message", args=[offset_id]))
