"""W4: the online producers of a group on a topic's brokers: client id, address, language, version."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.commands.parsing import form_errors_text
from console.forms import ProducerQueryForm
from console.queries import messages as queries
from console.views.common import cluster_of
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def producer_page(request):
    cluster = cluster_of(request)
    searched = "topic" in request.GET or "group" in request.GET
    form = ProducerQueryForm(request.GET if searched else None)
    context = {
        "form": form,
        "searched": searched,
        "connection": None,
        "missing": "",
        "topics": queries.sendable_topics(cluster),
    }
    if searched:
        if not form.is_valid():
            raise BadRequest(f"Invalid query: {form_errors_text(form)}")
        group, topic = form.cleaned_data["group"], form.cleaned_data["topic"]
        context["connection"], context["missing"] = queries.producer_connection(cluster, group, topic)
    return render(request, "console/producers.html", context)
