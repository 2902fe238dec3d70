"""The name-server switch (kept in the user's session)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.forms import NamesrvSwitchForm
from console.views.common import invalid_form
from core.audit import audit
from core.cluster_access import select_namesrv
from core.models import AuditRecord
from core.roles import VIEWER, require_role


@require_POST
@require_role(VIEWER)
def namesrv_switch(request):
    """Any console user may look at another configured cluster; only settings list the choices,
    so the console never connects to an address typed into a form."""
    form = NamesrvSwitchForm(request.POST)
    if not form.is_valid():
        invalid_form(request, "namesrv.switch", "", form)
    addr = form.cleaned_data["namesrv"]
    try:
        select_namesrv(request, addr)
    except ValueError as exc:
        audit(request, "namesrv.switch", addr, {}, AuditRecord.RESULT_FAILED, str(exc))
        raise BadRequest(str(exc)) from None
    audit(request, "namesrv.switch", addr, {}, AuditRecord.RESULT_OK, "")
    messages.info(request, f"Now using name server {addr}")
    target = form.cleaned_data.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)
