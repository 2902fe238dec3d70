"""The console's navigation bar: one list, each entry a URL name.

Entries whose URL name does not resolve are left out, so a page another app provides (analytics)
appears in the bar as soon as its URL module is included, and a missing one never shows up as a
dead link. So is a page the user's role may not open (the role its view asks for, as
``console.roles.require_role`` marks it): a viewer is not offered the admins' ACL page.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, resolve, reverse

from console.roles import ROLE_ORDER, VIEWER

NAV_ITEMS: list[tuple[str, str]] = [
    ("Cluster", "console:cluster"),
    ("Topics", "console:topics"),
    ("Consumers", "console:groups"),
    ("Producers", "console:producers"),
    ("Messages", "console:messages"),
    ("DLQ", "console:dlq"),
    ("Delayed", "console:delayed"),
    ("Transactions", "console:transactions"),
    ("Live tail", "console:tail"),
    ("Analytics", "analytics:run_list"),
    ("Audit", "console:audit"),
    ("ACL", "console:acl"),
]


def _may_open(url: str, role: str | None) -> bool:
    needed = getattr(resolve(url).func, "required_role", None) or VIEWER
    return role in ROLE_ORDER and ROLE_ORDER.index(role) >= ROLE_ORDER.index(needed)


def nav_links(current_path: str, role: str | None = VIEWER) -> list[dict[str, object]]:
    """The bar for a user of ``role`` (the console role, ``console.roles.user_role``)."""
    links = []
    for label, url_name in NAV_ITEMS:
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        if not _may_open(url, role):
            continue
        active = current_path == url or (url != "/" and current_path.startswith(url))
        links.append({"label": label, "url": url, "active": active})
    return links
