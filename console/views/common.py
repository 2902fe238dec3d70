"""What every console view shares: running a cluster action with its audit record and flash message,
refusing bad input (``BadRequest``, answered by the project's 400 handler) with its audit record,
form errors as text, times and numbers from forms, message rows and exports.

Views raise, never render, their refusals: ``BadRequest`` for input, ``PermissionDenied`` for a role
(``core.roles``), ``Http404`` or the admin's ``NotFoundError`` for what does not exist; a cluster
failure is an ``MQClientError``. ``core.errors`` turns each into its page.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import HttpResponse

from broker.client.admin import MQClientError, NotFoundError
from broker.common.message import MessageExt
from broker.common.message_view import describe_message
from console.message_export import EXPORT_FORMATS, export_response
from core.audit import audit
from core.models import AuditRecord


def audited(action: str):
    """For mutating views that raise their refusals: a refusal (bad input, a cluster error) that the
    view did not audit itself (``core.audit.audit`` notes on the request that it did) is audited
    as failed, with the form's fields, before its page is shown."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except (BadRequest, MQClientError) as exc:
                if not getattr(request, "console_audited", False):
                    fields = {k: v for k, v in request.POST.lists() if k != "csrfmiddlewaretoken"}
                    audit(request, action, request.path, fields, AuditRecord.RESULT_FAILED, str(exc))
                raise

        return wrapped

    return decorate


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
    values become a "failed" record and an error message rather than an error page.

    With ``missing_is_404`` an action on something that does not exist is audited as failed and its
    ``NotFoundError`` raised, so the answer is the 404 "Not found" page naming it
    (``core.errors``), not a redirect to a page about the missing thing."""
    try:
        result = operation()
    except (MQClientError, ValueError) as exc:
        audit(request, action, target, parameters, AuditRecord.RESULT_FAILED, str(exc))
        if missing_is_404 and isinstance(exc, NotFoundError):
            raise
        messages.error(request, f"{action} {target} failed: {exc}")
        return False, exc
    text = success(result)
    audit(request, action, target, parameters, AuditRecord.RESULT_OK, text)
    messages.success(request, text)
    return True, result


def save_on_masters(
    request,
    admin,
    action: str,
    noun: str,
    data: dict[str, Any],
    name: str,
    params: dict[str, Any],
    save_one: Callable[[str], Any],
) -> bool:
    """A save form's action: ``save_one(addr)`` on the broker the form names (``broker_addr``) or on
    every master of its ``cluster``, run and audited by ``run_action`` with a message naming the
    brokers; whether it succeeded."""

    def save() -> list[str]:
        addrs = admin.resolve_masters(data["broker_addr"] or None, data["cluster"] or None)
        for addr in addrs:
            save_one(addr)
        return addrs

    ok, _ = run_action(
        request, action, name, params, save, lambda addrs: f"{noun} {name} saved on {', '.join(addrs)}"
    )
    return ok


def invalid_target(request, action: str, target: str, reason: str) -> NoReturn:
    """A name in the URL that cannot name anything: audited as failed, refused with a 400."""
    audit(request, action, target, {}, AuditRecord.RESULT_FAILED, f"invalid input: {reason}")
    raise BadRequest(reason)


def form_errors_text(form) -> str:
    parts = []
    for name, errors in form.errors.items():
        label = "form" if name == "__all__" else name
        parts.append(f"{label}: {' '.join(str(e) for e in errors)}")
    return "; ".join(parts)


def invalid_form(request, action: str, target: str, form) -> NoReturn:
    """A rejected form: audited as failed (someone tried), refused with a 400 that names each field."""
    reason = form_errors_text(form)
    parameters = {k: v for k, v in form.data.items() if k != "csrfmiddlewaretoken"}
    audit(request, action, target, parameters, AuditRecord.RESULT_FAILED, f"invalid input: {reason}")
    raise BadRequest(f"Invalid input: {reason}")


def ms_to_datetime(ms: int | None) -> datetime.datetime | None:
    if not ms:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def parse_datetime_ms(text: str | None, field: str) -> int | None:
    """An ``<input type=datetime-local>`` value (UTC) or epoch milliseconds → epoch ms."""
    text = (text or "").strip()
    if not text:
        return None
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"{field}: {text!r} is not a date and time (use YYYY-MM-DDTHH:MM)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def parse_float(text: str | None, field: str, minimum: float = 0, maximum: float = 100_000) -> float:
    text = (text or "").strip() or "0"
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{field}: {text!r} is not a number") from None
    if not minimum <= value <= maximum:
        raise BadRequest(f"{field} must be between {minimum:g} and {maximum:g}")
    return value


def message_row(message, broker_name: str = "") -> dict:
    """What the operations pages' message tables show of a MessageExt."""
    return {
        "msg_id": message.client_msg_id,
        "offset_msg_id": message.msg_id,
        "topic": message.topic,
        "tags": message.tags or "",
        "keys": " ".join(message.keys),
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "born": ms_to_datetime(message.born_timestamp),
        "stored": ms_to_datetime(message.store_timestamp),
        "reconsume_times": message.reconsume_times,
        "body_size": len(message.body),
        "broker": broker_name,
        "properties": dict(sorted(message.properties.items())),
    }


def export_messages(
    rows: list[tuple[MessageExt, str, dict]], fmt: str, filename: str, extra_columns: tuple[str, ...]
) -> HttpResponse:
    """W14 for the operations pages: the Messages page's export (``console.message_export``) of
    ``(message, broker name, what the page adds)`` rows, ``extra_columns`` naming the additions."""
    if fmt not in EXPORT_FORMATS:
        raise BadRequest(f"export format must be csv or json, not {fmt!r}")
    views = [describe_message(message, broker_name) | extra for message, broker_name, extra in rows]
    return export_response(views, fmt, filename, extra_columns)
