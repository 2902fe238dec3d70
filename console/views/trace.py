"""Message trace (W13): a message's life as a timeline."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from broker.client.admin import NotFoundError
from broker.common.message_codec import MessageDecodeError, decode_offset_msg_id
from broker.common.topic_config import validate_topic
from console import replay_audit
from console.services import trace
from console.views.common import message_row, ms_to_datetime
from core.cluster_access import admin_of
from core.roles import VIEWER, require_role

MAX_MSG_ID_LENGTH = 128  # RocketMQ's ids have 32 to 56 hex digits


def _find_message(admin, msg_id: str, topic: str):
    """The message itself, or None when the cluster holds no such message (an unreachable cluster
    is not "not found": its error propagates and becomes a 503 page). Without a topic only an
    offsetMsgId can be looked up; a client msgId is then found in the trace topic alone."""
    try:
        if topic:
            return admin.query_message_by_id(topic, msg_id)[0]
        decode_offset_msg_id(msg_id)
        return admin.view_cluster_message(msg_id)
    except (NotFoundError, MessageDecodeError):
        return None


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
        message = _find_message(admin_of(request), msg_id, topic)
        lookup_id = message.client_msg_id if message is not None else msg_id
        events = trace.timeline(admin_of(request), lookup_id, message, _replay_events(lookup_id))
        context.update(
            message=message_row(message) if message is not None else None,
            events=[{"at": ms_to_datetime(e.timestamp), "event": e} for e in events],
            not_found=message is None and not events,
        )
        if context["not_found"]:
            status = 404  # neither the message nor anything about it exists: not found, said so
    return render(request, "console/trace.html", context, status=status)
