"""The console's home page: is everything all right? (brokers, throughput, disk, lag, firing
alerts, dead letters)."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.services.overview import overview
from core.cluster_access import admin_of, current_namesrv
from core.roles import require_login, user_role


@require_GET
@require_login
def home(request):
    """The overview for console users; for a user without a role (new accounts start so) the one
    page they may see, saying whom to ask."""
    if user_role(request.user) is None:
        return render(request, "console/no_role.html")
    sections = overview(admin_of(request), current_namesrv(request))
    return render(request, "console/overview.html", {"sections": sections})
