"""The project's one error funnel: every refusal and failure becomes a page in the console layout
that says what happened and what to do, never a bare server error.

Views raise and let Django answer: ``django.core.exceptions.BadRequest`` (or a
``SuspiciousOperation``) is 400, ``PermissionDenied`` 403, ``Http404`` 404, through the handlers
the root URLconf names (``project.urls``). A cluster failure (``MQClientError``) is answered
by ``ClusterErrorMiddleware`` with one mapping: 404 "Not found" when the thing asked for does not
exist (the error names it), else 503 with the reason — a server that does not answer ("Cluster
unavailable") or one that refused the request ("Refused by the cluster").

Refusals before any view runs answer the same way: a failed CSRF check (``csrf_failure``, the
``CSRF_FAILURE_VIEW``) is 403 with what to do, and a method a URL does not take is 405 naming the
methods it does (``MethodNotAllowedMiddleware``: Django's own 405 has an empty body).

Each answer is the full page, a fragment for htmx requests (which the page swaps in where the
answer was meant to go), or JSON for clients that ask for it.
"""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404

from broker.client.admin import (
    BrokerUnreachableError,
    MQBrokerError,
    MQClientError,
    NameServerUnreachableError,
    NotFoundError,
)

CORRECT_AND_RETRY = "Nothing was changed. Correct the values and try again."


def error_page(request, status: int, title: str, message: str, hint: str) -> HttpResponse:
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"title": title, "error": message, "advice": hint}, status=status)
    template = "console/_error.html" if request.headers.get("HX-Request") else "console/error.html"
    context = {"title": title, "message": message, "hint": hint, "status": status}
    return render(request, template, context, status=status)


def _reason(exception, default: str) -> str:
    return str(exception) if exception is not None and str(exception) else default


def bad_request(request, exception=None) -> HttpResponse:
    """handler400: input a view refuses (``BadRequest``), with the reason."""
    return error_page(
        request, 400, "Bad request", _reason(exception, "The request is malformed."), CORRECT_AND_RETRY
    )


def permission_denied(request, exception=None) -> HttpResponse:
    """handler403: the user's role does not allow the action (``core.roles``)."""
    reason = _reason(exception, "You may not do this.")
    return error_page(request, 403, "Not allowed", reason, "Nothing was changed.")


def csrf_failure(request, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form posted without the token of this session (a page left open across a
    log-in, cookies blocked, or a post from another site). Django's reason says which check failed."""
    message = f"The form's security token (CSRF) was missing or wrong: {reason or 'no reason given'}."
    hint = (
        "Nothing was changed. If you sent this form from the console, reload the page and send it "
        "again; the console needs its cookies."
    )
    return error_page(request, 403, "Not allowed", message, hint)


def page_not_found(request, exception=None) -> HttpResponse:
    """handler404: a page, or a thing a page names, that does not exist. A URL no pattern matches
    is named by its path only: the resolver's message lists every pattern of the console."""
    default = f"There is no page at {request.path}."
    reason = default if isinstance(exception, Resolver404) else _reason(exception, default)
    hint = "Check the name; the lists of the console show what exists."
    return error_page(request, 404, "Not found", reason, hint)


def server_error(request) -> HttpResponse:
    """handler500: a bug. The page still has the layout and says the action may not have been done."""
    hint = "This is a fault of the console; its log has the details. The action may not have been done."
    return error_page(request, 500, "Server error", "The console failed to answer this request.", hint)


def advice_for(error: MQClientError) -> str:
    """One sentence an operator can act on."""
    if "TLS" in str(error):  # the remoting client's reading of a TLS failure (the SDK's ClientTls)
        return (
            "The console's TLS settings must fit the servers' tls.server.mode: set ROCKETMQ_TLS_ENABLE "
            "and ROCKETMQ_TLS_TRUST_CERT (the CA of their certificates) for servers with TLS, and leave "
            "TLS off for servers without it."
        )
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
    if isinstance(error, MQBrokerError):
        return "The server refused the request; its reason is above."
    return "Check the values you entered and that the cluster is up."


def title_for(error: MQClientError) -> str:
    if isinstance(error, NameServerUnreachableError | BrokerUnreachableError):
        return "Cluster unavailable"
    if isinstance(error, NotFoundError):
        return "Not found"
    if isinstance(error, MQBrokerError):
        return "Refused by the cluster"
    return "Cluster error"


def status_for(error: MQClientError) -> int:
    """404 for something that does not exist; every other cluster failure is 503 with its reason."""
    return 404 if isinstance(error, NotFoundError) else 503


def cluster_error_page(request, error: MQClientError) -> HttpResponse:
    return error_page(request, status_for(error), title_for(error), str(error), advice_for(error))


class ClusterErrorMiddleware:
    """Answers a view's ``MQClientError`` with ``cluster_error_page``."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, MQClientError):
            return None
        return cluster_error_page(request, exception)


class MethodNotAllowedMiddleware:
    """Gives Django's empty 405 (``require_POST`` and its kin) the console's page, with the methods
    the URL takes (its ``Allow`` header kept)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code != 405 or response.content:
            return response
        allowed = response.get("Allow", "")
        methods = " or ".join(m.strip() for m in allowed.split(",") if m.strip()) or "other methods"
        message = f"{request.path} takes {methods} only, not {request.method}."
        hint = "Use the page's buttons and forms: they send what the console expects."
        page = error_page(request, 405, "Method not allowed", message, hint)
        page["Allow"] = allowed
        return page
