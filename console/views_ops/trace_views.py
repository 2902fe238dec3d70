"""Message trace (W13): a message's life as a timeline."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from broker.client.admin import MQAdminError, NotFoundError
from broker.common.topic_config import validate_topic
from console.models import AuditRecord
from console.roles import VIEWER, require_role

from . import connection
from .common import BadRequest, cluster_errors, message_row, ms_to_datetime
from .services import trace


def _find_message(admin, msg_id: str, topic: str):
    if topic:
        try:
            found = admin.query_message_by_id(topic, msg_id)
        except NotFoundError:
            return None
        return found[0] if found else None
    try:
        return admin.view_message(msg_id)
    except MQAdminError:
        return None


def _replay_events(msg_id: str) -> list[trace.TraceEvent]:
    records = AuditRecord.objects.filter(action="dlq.replay", parameters__msgId=msg_id).order_by("created_at")
    return [
        trace.TraceEvent(
            int(r.created_at.timestamp() * 1000),
            "replay",
            f"Replayed by {r.username} to {r.parameters.get('destination', '?')}",
            detail={"new msgId": r.parameters.get("newMsgId", ""), "result": r.result},
            ok=r.result == "ok",
        )
        for r in records
    ]


@require_GET
@require_role(VIEWER)
@cluster_errors
def message_trace(request):
    msg_id = (request.GET.get("msgId") or "").strip()
    topic = (request.GET.get("topic") or "").strip()
    context = {"msg_id": msg_id, "topic": topic}
    if msg_id:
        if topic and validate_topic(topic):
            raise BadRequest(validate_topic(topic))
        message = _find_message(connection.admin(request), msg_id, topic)
        lookup_id = message.client_msg_id if message is not None else msg_id
        events = trace.timeline(connection.admin(request), lookup_id, message, _replay_events(lookup_id))
        context.update(
            message=message_row(message) if message is not None else None,
            events=[{"at": ms_to_datetime(e.timestamp), "event": e} for e in events],
        )
    return render(request, "console_ops/trace.html", context)
