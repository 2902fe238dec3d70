"""Cluster failures as pages that say what happened and what to do, never a server error.

Read-only views simply let an ``MQAdminError`` propagate; this middleware renders it inside the
console's layout with a status and a title that tell people and scripts what kind of failure it
was: 503 "Cluster unavailable" only when a server does not answer, 404 "Not found" when the thing
asked for does not exist (the error names it), 502 when a server answered with an error. The
operations pages render the same mapping in their own layout (``views_ops.common``).
"""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import render

from broker.client.admin import (
    AdminRequestError,
    BrokerUnreachableError,
    MQAdminError,
    NameServerUnreachableError,
    NotFoundError,
)


def advice_for(error: MQAdminError) -> str:
    """One sentence an operator can act on."""
    if isinstance(error, NameServerUnreachableError):
        return (
            "Start the name server (make run starts name server, broker and console together, or run "
            "python -m broker.namesrv), or switch to another name server in the header."
        )
    if isinstance(error, BrokerUnreachableError):
        return (
            "The broker is registered but does not answer: check that its process is running and "
            "look at its log. A stopped broker leaves the name server's table within two minutes."
        )
    if isinstance(error, NotFoundError):
        return "Check the name; lists on the Topics and Consumers pages show what exists."
    if isinstance(error, AdminRequestError):
        return "The server refused the request; its reason is above."
    return "Check the values you entered and that the cluster is up."


def title_for(error: MQAdminError) -> str:
    if isinstance(error, NameServerUnreachableError | BrokerUnreachableError):
        return "Cluster unavailable"
    if isinstance(error, NotFoundError):
        return "Not found"
    if isinstance(error, AdminRequestError):
        return "Refused by the cluster"
    return "Cluster error"


def status_for(error: MQAdminError) -> int:
    if isinstance(error, NameServerUnreachableError | BrokerUnreachableError):
        return 503
    if isinstance(error, NotFoundError):
        return 404
    return 502


class ClusterErrorMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, MQAdminError):
            return None
        context = {"title": title_for(exception), "error": str(exception), "advice": advice_for(exception)}
        if "application/json" in request.headers.get("Accept", ""):
            return JsonResponse(context, status=status_for(exception))
        partial = bool(request.headers.get("HX-Request"))
        template = "console/_cluster_error.html" if partial else "console/cluster_error.html"
        return render(request, template, context, status=status_for(exception))
