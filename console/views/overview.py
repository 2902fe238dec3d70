"""The console's home page: is everything all right? (brokers, throughput, disk, lag, firing
alerts, dead letters)."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.queries import topology
from console.views.common import cluster_of
from core.roles import require_login, user_role


@require_GET
@require_login
def home(request):
    """The overview for console users; for a user without a role (new accounts start so) the one
    page they may see, saying whom to ask."""
    if user_role(request.user) is None:
        return render(request, "console/no_role.html")
    sections = topology.overview_sections(cluster_of(request))
    return render(request, "console/overview.html", {"sections": sections})
