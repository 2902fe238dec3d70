"""The console's home page: is everything all right? (brokers, throughput, disk, lag, firing
alerts, dead letters), and the W17 downloads for teams on Prometheus and Grafana."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.cluster_access import admin_of, current_namesrv
from console.export.grafana_dashboard import dashboard
from console.roles import VIEWER, require_login, require_role, user_role
from console.services.overview import overview


@require_GET
@require_login
def home(request):
    """The overview for console users; for a user without a role (new accounts start so) the one
    page they may see, saying whom to ask."""
    if user_role(request.user) is None:
        return render(request, "console/no_role.html")
    sections = overview(admin_of(request), current_namesrv(request))
    return render(request, "console/overview.html", {"sections": sections})


@require_GET
@require_role(VIEWER)
def export_page(request):
    """What to point Prometheus and Grafana at: the scrape, the generated rules, the dashboard."""
    return render(request, "console/export.html", {"metrics_url": request.build_absolute_uri("/metrics")})


@require_GET
@require_role(VIEWER)
def grafana_dashboard(request):
    response = HttpResponse(json.dumps(dashboard(), indent=2), content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="pyrocket-grafana-dashboard.json"'
    return response


@require_GET
@require_role(VIEWER)
def prometheus_rules(request):
    from alerts.prometheus_rules import rules_yaml

    response = HttpResponse(rules_yaml(), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="pyrocket-alert-rules.yml"'
    return response
