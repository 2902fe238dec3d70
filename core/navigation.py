"""The console's navigation (the sidebar): one list of sections, each entry a URL name.

Entries whose URL name does not resolve are left out, so a page another app provides (analytics)
appears in the bar as soon as its URL module is included, and a missing one never shows up as a
dead link. So is a page the user's role may not open (the role its view asks for, as
``core.roles.require_role`` marks it): a viewer is not offered the admins' ACL page. Django's
admin site lets in staff users only (``is_staff``, whatever their console role), so only they are
offered it.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, resolve, reverse

from core.roles import ROLE_ORDER, VIEWER

# (section, label, URL name), in the sidebar's order; the template groups consecutive sections.
NAV_ITEMS: list[tuple[str, str, str]] = [
    ("", "Overview", "console:home"),
    ("Cluster", "Cluster", "console:cluster"),
    ("Cluster", "Topics", "console:topics"),
    ("Cluster", "Consumers", "console:groups"),
    ("Cluster", "Producers", "console:producers"),
    ("Messages", "Messages", "console:messages"),
    ("Messages", "Live tail", "console:tail"),
    ("Messages", "DLQ", "console:dlq"),
    ("Messages", "Delayed", "console:delayed"),
    ("Messages", "Transactions", "console:transactions"),
    ("Messages", "Trace", "console:trace"),
    ("Monitoring", "Alerts", "alerts:events"),
    ("Monitoring", "Alert rules", "alerts:rules"),
    ("Monitoring", "History", "history:index"),
    ("Monitoring", "Analytics", "analytics:run_list"),
    ("Monitoring", "Prometheus & Grafana", "console:export"),
    ("Admin", "Audit", "console:audit"),
    ("Admin", "ACL", "console:acl"),
    ("Admin", "Django admin", "admin:index"),
]
STAFF_ONLY = {"admin:index"}


def _may_open(url: str, role: str | None) -> bool:
    needed = getattr(resolve(url).func, "required_role", None) or VIEWER
    return role in ROLE_ORDER and ROLE_ORDER.index(role) >= ROLE_ORDER.index(needed)


def nav_links(current_path: str, role: str | None = VIEWER, staff: bool = False) -> list[dict[str, object]]:
    """The sidebar for a user of ``role`` (the console role, ``core.roles.user_role``), ``staff``
    when Django's admin site lets them in: each link with its ``section`` (the template's
    ``regroup``)."""
    links = []
    for section, label, url_name in NAV_ITEMS:
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        if not (staff if url_name in STAFF_ONLY else _may_open(url, role)):
            continue
        active = current_path == url or (url != "/" and current_path.startswith(url))
        links.append({"section": section, "label": label, "url": url, "active": active})
    return links
