"""Message trace (W13): a message's life as a timeline."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from broker.common.topic_config import validate_topic
from console import replay_audit
from console.queries import messages as queries
from console.services import trace
from console.timestamps import ms_to_datetime
from console.views.common import cluster_of, message_row
from core.roles import VIEWER, require_role

MAX_MSG_ID_LENGTH = 128  # RocketMQ's ids have 32 to 56 hex digits


def _replay_events(msg_id: str) -> list[trace.TraceEvent]:
    return [
        trace.TraceEvent(
            int(r.created_at.timestamp() * 1000),
            "replay",
            f"Replayed by {r.username} to {r.parameters.get('destination', '?')}",
            detail={"new msgId": r.parameters.get("newMsgId", ""), "result": r.result},
            ok=r.result == "ok",
        )
        for r in replay_audit.replays_of(msg_id)
    ]


@require_GET
@require_role(VIEWER)
def message_trace(request):
    msg_id = (request.GET.get("msgId") or "").strip()
    topic = (request.GET.get("topic") or "").strip()
    context = {"msg_id": msg_id, "topic": topic}
    status = 200
    if msg_id:
        if len(msg_id) > MAX_MSG_ID_LENGTH:
            raise BadRequest(f"a message id has at most {MAX_MSG_ID_LENGTH} characters")
        if topic and validate_topic(topic):
            raise BadRequest(validate_topic(topic))
        cluster = cluster_of(request)
        message = queries.find_message(cluster, msg_id, topic)
        lookup_id = message.client_msg_id if message is not None else msg_id
        events = queries.timeline(cluster, lookup_id, message, _replay_events(lookup_id))
        context.update(
            message=message_row(message) if message is not None else None,
            events=[{"at": ms_to_datetime(e.timestamp), "event": e} for e in events],
            not_found=message is None and not events,
        )
        if context["not_found"]:
            status = 404  # neither the message nor anything about it exists: not found, said so
    return render(request, "console/trace.html", context, status=status)
