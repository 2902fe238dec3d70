"""Pending transactions (W7): half messages with age and check count; operator commit / rollback."""

from __future__ import annotations

from django.contrib import messages as flash
from django.core.exceptions import BadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import MQClientError
from broker.common.topic_config import TRANS_HALF_TOPIC
from console.services import transactions
from console.views.common import audited, export_messages, message_row
from core.audit import audit
from core.cluster_access import admin_of
from core.models import AuditRecord
from core.roles import VIEWER, require_permission, require_role


@require_GET
@require_role(VIEWER)
def pending_transactions(request):
    pending = transactions.pending_half_messages(admin_of(request))
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
    template = "console/_transactions_table.html" if request.htmx else "console/transactions.html"
    return render(request, template, {"rows": rows})


@require_GET
@require_role(VIEWER)
def pending_transactions_export(request, fmt: str):
    pending = transactions.pending_half_messages(admin_of(request))
    rows = [
        (h.message, h.located.broker_name, {"real_topic": h.real_topic, "producer_group": h.producer_group,
                                            "check_times": h.check_times, "age_seconds": round(h.age_s())})
        for h in pending
    ]  # fmt: skip
    extra = ("real_topic", "producer_group", "check_times", "age_seconds")
    return export_messages(rows, fmt, "pending-transactions", extra)


@require_POST
@require_permission("transaction.end")
@audited("transaction.end")
def end_transaction(request):
    offset_msg_id = (request.POST.get("offset_msg_id") or "").strip()
    action = request.POST.get("action")
    if action not in ("commit", "rollback"):
        raise BadRequest("action must be commit or rollback")
    if not offset_msg_id:
        raise BadRequest("name the half message (offset_msg_id)")
    admin = admin_of(request)
    # One action name whatever happens (refused by role, bad input, done): the decision is a parameter.
    try:
        half = transactions.find_pending(admin, offset_msg_id)
    except ValueError as exc:
        audit(
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
    except MQClientError as exc:
        audit(request, "transaction.end", target, params, AuditRecord.RESULT_FAILED, str(exc))
        raise
    audit(request, "transaction.end", target, params)
    flash.success(
        request, f"{action.capitalize()} of {half.message.client_msg_id} sent to {half.located.broker_name}."
    )
    return redirect("console:transactions")
