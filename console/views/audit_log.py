"""W11: the audit log, newest first, filtered by user, action and result."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.models import AuditRecord
from core.roles import VIEWER, require_role

PAGE_SIZE = 50


@require_GET
@require_role(VIEWER)
def audit_page(request):
    records = AuditRecord.objects.all()
    user = request.GET.get("user", "").strip()
    action = request.GET.get("action", "").strip()
    result = request.GET.get("result", "").strip()
    if user:
        records = records.filter(username__icontains=user)
    if action:
        records = records.filter(action__icontains=action)
    if result:
        records = records.filter(result=result)
    page = Paginator(records, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": {"user": user, "action": action, "result": result},
        "actions": AuditRecord.objects.order_by("action").values_list("action", flat=True).distinct(),
        "results": [AuditRecord.RESULT_OK, AuditRecord.RESULT_FAILED, AuditRecord.RESULT_DENIED],
    }
    template = "console/_audit_table.html" if request.htmx else "console/audit.html"
    return render(request, template, context)
