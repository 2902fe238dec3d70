"""Pending transactions (W7): half messages with age and check count; operator commit / rollback."""

from __future__ import annotations

from django.contrib import messages as flash
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import MQAdminError
from broker.common.topic_config import TRANS_HALF_TOPIC
from console.models import AuditRecord
from console.roles import VIEWER, require_permission, require_role

from . import connection
from .common import BadRequest, audited, cluster_errors, export_messages, message_row, record
from .services import transactions


@require_GET
@require_role(VIEWER)
@cluster_errors
def pending_transactions(request):
    pending = transactions.pending_half_messages(connection.admin(request))
    rows = [
        {
            **message_row(h.message, h.located.broker_name),
            "producer_group": h.producer_group,
            "real_topic": h.real_topic,
            "check_times": h.check_times,
            "age_s": round(h.age_s()),
        }
        for h in pending
    ]
    template = "console_ops/_transactions_table.html" if request.htmx else "console_ops/transactions.html"
    return render(request, template, {"rows": rows})


@require_GET
@require_role(VIEWER)
@cluster_errors
def pending_transactions_export(request, fmt: str):
    pending = transactions.pending_half_messages(connection.admin(request))
    rows = [
        (h.message, h.located.broker_name, {"real_topic": h.real_topic, "producer_group": h.producer_group,
                                            "check_times": h.check_times, "age_seconds": round(h.age_s())})
        for h in pending
    ]  # fmt: skip
    extra = ("real_topic", "producer_group", "check_times", "age_seconds")
    return export_messages(rows, fmt, "pending-transactions", extra)


@require_POST
@require_permission("transaction.end")
@cluster_errors
@audited("transaction.end")
def end_transaction(request):
    offset_msg_id = (request.POST.get("offset_msg_id") or "").strip()
    action = request.POST.get("action")
    if action not in ("commit", "rollback"):
        raise BadRequest("action must be commit or rollback")
    if not offset_msg_id:
        raise BadRequest("name the half message (offset_msg_id)")
    admin = connection.admin(request)
    # One action name whatever happens (refused by role, bad input, done): the decision is a parameter.
    try:
        half = transactions.find_pending(admin, offset_msg_id)
    except ValueError as exc:
        record(
            request, "transaction.end", offset_msg_id, {"action": action}, AuditRecord.RESULT_FAILED, str(exc)
        )
        raise BadRequest(str(exc)) from None
    params = {
        "action": action,
        "producerGroup": half.producer_group,
        "topic": half.real_topic,
        "msgId": half.message.client_msg_id,
        "broker": half.located.broker_name,
        "halfOffset": half.message.queue_offset,
    }
    target = f"{TRANS_HALF_TOPIC}:{offset_msg_id}"
    try:
        transactions.end_transaction(admin, half, commit=action == "commit")
    except MQAdminError as exc:
        record(request, "transaction.end", target, params, AuditRecord.RESULT_FAILED, str(exc))
        raise
    record(request, "transaction.end", target, params)
    flash.success(
        request, f"{action.capitalize()} of {half.message.client_msg_id} sent to {half.located.broker_name}."
    )
    return redirect("console_ops:transactions")
