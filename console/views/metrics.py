"""W10: ``/metrics`` in Prometheus text format (no login, as exporters are scraped; read-only figures).

``?namesrv=`` picks another configured name server; by default the first of ``BROKER_NAMESRV``.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from console.cluster_access import admin_for, namesrv_choices
from console.metrics import collector_for


@require_GET
def metrics(request):
    choices = namesrv_choices()
    namesrv = request.GET.get("namesrv") or (choices[0] if choices else "")
    if namesrv not in choices:
        return HttpResponse(
            f"unknown name server {namesrv!r}; configured: {', '.join(choices)}\n",
            status=400,
            content_type="text/plain",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector_for(admin_for(namesrv), namesrv))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
