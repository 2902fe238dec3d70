"""Pending transactions (W7): half messages with age and check count; operator commit / rollback."""

from __future__ import annotations

from django.contrib import messages as flash
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.commands import messages as commands
from console.commands import serves
from console.queries import operations as queries
from console.views.common import cluster_of, export_messages, message_row, run
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def pending_transactions(request):
    pending = queries.pending_transactions(cluster_of(request))
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
    pending = queries.pending_transactions(cluster_of(request))
    rows = [
        (h.message, h.located.broker_name, {"real_topic": h.real_topic, "producer_group": h.producer_group,
                                            "check_times": h.check_times, "age_seconds": round(h.age_s())})
        for h in pending
    ]  # fmt: skip
    extra = ("real_topic", "producer_group", "check_times", "age_seconds")
    return export_messages(rows, fmt, "pending-transactions", extra)


@require_POST
@serves(commands.END_TRANSACTION)
def end_transaction(request):
    try:
        outcome = run(request, commands.END_TRANSACTION, commands.EndTransaction.parse(request.POST))
    except commands.TransactionEndFailed as exc:
        raise exc.error from None  # the cluster's refusal, shown as its error page
    flash.success(request, outcome.value)
    return redirect("console:transactions")
