"""What every console view shares: the request's cluster handle, running a command
(``console.commands``, through ``core.boundary``) for the request with its flash message, message
rows and exports.

Views raise, never render, their refusals: ``BadRequest`` for input (a command's ``Invalid`` is
one), ``PermissionDenied`` for a role (raised by the boundary), ``Http404`` or the admin's
``NotFoundError`` for what does not exist; a cluster failure is an ``MQClientError``.
``core.errors`` turns each into its page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import HttpResponse

from broker.common.errors import NotFoundError
from broker.common.message import MessageExt
from broker.common.message_view import describe_message
from console.commands import FAILURES, Actor, Cluster, Outcome, execute
from console.message_export import EXPORT_FORMATS, export_response
from console.timestamps import ms_to_datetime


def cluster_of(request) -> Cluster:
    """The cluster the request's commands and reads act on: the session's name server."""
    return Cluster.of_request(request)


def run(request, action: str, params: Any) -> Outcome:
    """The command of ``action`` for the request's user on the request's cluster (``execute``, the
    boundary that checks the role and writes the one audit record); its refusals are raised for
    ``core.errors`` to show."""
    return execute(action, Actor.of_request(request), cluster_of(request), params)


def perform(request, action: str, params: Any, *, missing_is_404: bool = False) -> Outcome | None:
    """``run`` for the pages that flash what happened: a cluster refusal or a value the cluster
    cannot take becomes an error message (None), not an error page; success flashes the outcome.

    With ``missing_is_404`` an action on something that does not exist raises its
    ``NotFoundError``, so the answer is the 404 "Not found" page naming it (``core.errors``)."""
    try:
        outcome = run(request, action, params)
    except FAILURES as exc:
        if missing_is_404 and isinstance(exc, NotFoundError):
            raise
        messages.error(request, f"{action} {params.target} failed: {exc}")
        return None
    messages.success(request, outcome.detail)
    return outcome


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
