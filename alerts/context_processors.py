"""The header's alert badge (``templates/alerts/_badge.html``): how many events fire unacknowledged.

One COUNT over the (state, acknowledged_at) index, and only when a page renders the badge: the
figure is computed on first use in the template, not for every request (JSON views, redirects).
"""

from __future__ import annotations

from functools import cached_property

from core.public import VIEWER, has_role


class AlertBadge:
    @cached_property
    def firing(self) -> int:
        from .models import AlertEvent

        return AlertEvent.objects.filter(state=AlertEvent.FIRING, acknowledged_at__isnull=True).count()


def alerts_badge(request) -> dict[str, object]:
    user = getattr(request, "user", None)
    if not (user and user.is_authenticated and has_role(user, VIEWER)):
        return {"alerts_badge": None}  # the badge links to a page only viewers and above may open
    return {"alerts_badge": AlertBadge()}
