"""The name-server switch (kept in the user's session)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.commands import serves, session
from console.views.common import run


@require_POST
@serves(session.SWITCH)
def namesrv_switch(request):
    """Any console user may look at another configured cluster (``console.commands.session``)."""
    try:
        outcome = run(request, session.SWITCH, session.SwitchNamesrv.parse(request.POST))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    chosen = outcome.value
    session.remember(request, chosen.namesrv)
    messages.info(request, f"Now using name server {chosen.namesrv}")
    target = chosen.next_url or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)
