"""Helpers every operations view shares: cluster errors as pages, times, form parsing."""

from __future__ import annotations

import datetime
from functools import wraps

from django.http import HttpResponse
from django.shortcuts import render

from broker.client.admin import MQAdminError
from broker.common.message import MessageExt
from broker.common.message_view import describe_message
from console.audit import audit
from console.cluster_errors import advice_for, status_for, title_for
from console.message_export import EXPORT_FORMATS, export_response


class BadRequest(ValueError):
    """Input a view refuses; rendered as a 400 page with the reason."""


def cluster_errors(view):
    """Render cluster failures and bad input as pages that say what went wrong and what to do, with
    the console's one mapping of cluster errors to statuses (``console.cluster_errors``)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except BadRequest as exc:
            return _error(request, 400, "Bad request", str(exc), "Correct the form and try again.")
        except MQAdminError as exc:
            return _error(request, status_for(exc), title_for(exc), str(exc), advice_for(exc))

    return wrapped


def record(
    request,
    action: str,
    target: str = "",
    parameters: dict | None = None,
    result: str = "ok",
    detail: str = "",
):
    """``console.audit.audit``, remembering on the request that this action has its record."""
    request.ops_audited = True
    return audit(request, action, target, parameters, result, detail)


def audited(action: str):
    """For mutating views: a refusal (bad input, a cluster error) that the view did not audit itself
    is audited as failed, with the form's fields, before the error page is shown."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except (BadRequest, MQAdminError) as exc:
                if not getattr(request, "ops_audited", False):
                    fields = {k: v for k, v in request.POST.lists() if k != "csrfmiddlewaretoken"}
                    record(request, action, request.path, fields, "failed", str(exc))
                raise

        return wrapped

    return decorate


def _error(request, status: int, title: str, message: str, hint: str):
    template = "console_ops/_error.html" if request.headers.get("HX-Request") else "console_ops/error.html"
    context = {"title": title, "message": message, "hint": hint, "status": status}
    return render(request, template, context, status=status)


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
    """What message tables show of a MessageExt."""
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
