"""The alerts app's section of the overview page (registered with ``core.overview``)."""

from __future__ import annotations

from broker.client.admin import MQAdmin
from core.overview import Section

MAX_EVENTS = 20


def firing_alerts(admin: MQAdmin, cluster: str) -> Section:
    """Open events of the name server's rules (the header's badge counts every name server's)."""
    from .models import AlertEvent

    open_events = AlertEvent.objects.filter(state__in=AlertEvent.OPEN_STATES, cluster=cluster)
    # "firing" sorts before "pending"; the newest first within each.
    events = list(open_events.order_by("state", "-started_at")[:MAX_EVENTS])
    firing = open_events.filter(state=AlertEvent.FIRING).count()
    return Section(events, source="alert rules, evaluated after each history sample", count=firing)
