"""W17: what teams on Prometheus and Grafana take from the console: the page saying how to scrape
``/metrics``, the Prometheus rule file generated from the alert rules, the Grafana dashboard. Any
console role may download them (they name no more than ``/metrics`` does)."""

from __future__ import annotations

import json

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.export.grafana_dashboard import dashboard
from core import exports
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def export_page(request):
    """What to point Prometheus and Grafana at: the scrape, the generated rules, the dashboard."""
    return render(request, "console/export.html")


@require_GET
@require_role(VIEWER)
def grafana_dashboard(request):
    response = HttpResponse(json.dumps(dashboard(), indent=2), content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="pyrocket-grafana-dashboard.json"'
    return response


@require_GET
@require_role(VIEWER)
def prometheus_rules(request):
    rules = exports.document(exports.PROMETHEUS_RULES)
    if rules is None:
        raise Http404("no alert rules: the alerts app is not installed")
    response = HttpResponse(rules, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="pyrocket-alert-rules.yml"'
    return response
