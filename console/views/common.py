"""What every console view shares: running a cluster action with its audit record and flash message,
clear 400 answers for bad input, and form errors as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import render

from broker.client.admin import MQAdminError, NotFoundError
from console.audit import audit
from console.models import AuditRecord


def run_action(
    request,
    action: str,
    target: str,
    parameters: dict[str, Any],
    operation: Callable[[], Any],
    success: Callable[[Any], str],
    *,
    missing_is_404: bool = False,
) -> tuple[bool, Any]:
    """Do ``operation`` once; audit it with its result; flash what happened. Cluster refusals and bad
    values become a "failed" record and an error message rather than a server error.

    With ``missing_is_404`` an action on something that does not exist is audited as failed and its
    ``NotFoundError`` raised, so the answer is the 404 "Not found" page naming it
    (``console.cluster_errors``), not a redirect to a page about the missing thing."""
    try:
        result = operation()
    except (MQAdminError, ValueError) as exc:
        audit(request, action, target, parameters, AuditRecord.RESULT_FAILED, str(exc))
        if missing_is_404 and isinstance(exc, NotFoundError):
            raise
        messages.error(request, f"{action} {target} failed: {exc}")
        return False, exc
    text = success(result)
    audit(request, action, target, parameters, AuditRecord.RESULT_OK, text)
    messages.success(request, text)
    return True, result


def bad_request(request, reason: str) -> HttpResponse:
    """HTTP 400 inside the layout: the reason, and a way back to the form."""
    back = request.headers.get("Referer") or ""
    return render(request, "console/bad_request.html", {"reason": reason, "back": back}, status=400)


def invalid_target(request, action: str, target: str, reason: str) -> HttpResponse:
    """A name in the URL that cannot name anything: audited as failed, answered with a 400."""
    audit(request, action, target, {}, AuditRecord.RESULT_FAILED, f"invalid input: {reason}")
    return bad_request(request, reason)


def form_errors_text(form) -> str:
    parts = []
    for name, errors in form.errors.items():
        label = "form" if name == "__all__" else name
        parts.append(f"{label}: {' '.join(str(e) for e in errors)}")
    return "; ".join(parts)


def invalid_form(request, action: str, target: str, form) -> HttpResponse:
    """A rejected form: audited as failed (someone tried), answered with a 400 that names each field."""
    reason = form_errors_text(form)
    parameters = {k: v for k, v in form.data.items() if k != "csrfmiddlewaretoken"}
    audit(request, action, target, parameters, AuditRecord.RESULT_FAILED, f"invalid input: {reason}")
    return bad_request(request, f"Invalid input: {reason}")
