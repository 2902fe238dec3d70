"""The name-server switch (kept in the user's session)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.commands import serves, session
from console.views.common import run
from core.cluster_access import select_namesrv


@require_POST
@serves(session.SWITCH)
def namesrv_switch(request):
    """Any console user may look at another configured cluster (``console.commands.session``)."""
    params = session.SwitchNamesrv.parse(request.POST)
    try:
        outcome = run(request, session.SWITCH, params)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    select_namesrv(request, outcome.value)
    messages.info(request, f"Now using name server {outcome.value}")
    target = params.next_url or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)
