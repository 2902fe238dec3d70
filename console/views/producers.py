"""W4: the online producers of a group on a topic's brokers: client id, address, language, version."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from broker.client.admin import MQBrokerError
from broker.common.codes import ResponseCode
from console.commands.parsing import form_errors_text
from console.forms import ProducerQueryForm
from core.cluster_access import admin_of
from core.cluster_queries import topic_rows
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def producer_page(request):
    admin = admin_of(request)
    searched = "topic" in request.GET or "group" in request.GET
    form = ProducerQueryForm(request.GET if searched else None)
    context = {
        "form": form,
        "searched": searched,
        "connection": None,
        "missing": "",
        "topics": [t.name for t in topic_rows(admin) if "normal" in t.kinds or "fifo" in t.kinds],
    }
    if searched:
        if not form.is_valid():
            raise BadRequest(f"Invalid query: {form_errors_text(form)}")
        try:
            context["connection"] = admin.producer_connection(
                form.cleaned_data["group"], form.cleaned_data["topic"]
            )
        except MQBrokerError as exc:
            if exc.code != ResponseCode.SYSTEM_ERROR:  # RocketMQ: "the producer group not exist"
                raise
            context["missing"] = exc.remark or str(exc)
    return render(request, "console/producers.html", context)
