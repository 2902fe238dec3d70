"""Delayed-message pages (W6): pending count and next due time per level, and a level's messages."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.queries import operations as queries
from console.services import delayed
from console.timestamps import ms_to_datetime
from console.views.common import cluster_of, export_messages, message_row
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def delayed_levels(request):
    brokers = queries.delay_levels(cluster_of(request))
    now = delayed.now_ms()
    context = {
        "brokers": [
            {
                "name": b.broker_name,
                "addr": b.broker_addr,
                "error": b.error,
                "pending": sum(level.pending for level in b.levels),
                "levels": [
                    {
                        "level": level.level,
                        "label": level.label,
                        "pending": level.pending,
                        "progress": level.progress,
                        "max_offset": level.max_offset,
                        "next_due": ms_to_datetime(level.next_due_ms),
                        "next_due_in_s": None
                        if level.next_due_ms is None
                        else max(0, round((level.next_due_ms - now) / 1000)),
                    }
                    for level in b.levels
                ],
            }
            for b in brokers
        ]
    }
    return render(request, "console/delayed_levels.html", context)


def _pending(request, broker_name: str, level: int):
    try:
        found = queries.pending_of_level(cluster_of(request), broker_name, level)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if found is None:
        raise Http404(f"broker {broker_name!r} is not in the cluster (or has no master)")
    return found


@require_GET
@require_role(VIEWER)
def delayed_level_export(request, broker_name: str, level: int, fmt: str):
    _, pending = _pending(request, broker_name, level)
    rows = [
        (p.located.message, broker_name, {"real_topic": p.real_topic, "real_queue_id": p.real_queue_id,
                                          "level": level, "due_timestamp": p.due_ms})
        for p in pending
    ]  # fmt: skip
    extra = ("real_topic", "real_queue_id", "level", "due_timestamp")
    return export_messages(rows, fmt, f"delayed-{broker_name}-level{level}", extra)


@require_GET
@require_role(VIEWER)
def delayed_level(request, broker_name: str, level: int):
    status, pending = _pending(request, broker_name, level)
    rows = [
        {
            **message_row(p.located.message, broker_name),
            "real_topic": p.real_topic,
            "real_queue_id": p.real_queue_id,
            "due": ms_to_datetime(p.due_ms),
        }
        for p in pending
    ]
    context = {"broker": broker_name, "status": status, "rows": rows, "more": status.pending - len(rows)}
    return render(request, "console/delayed_level.html", context)
