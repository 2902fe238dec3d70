"""The console's navigation bar: one list, each entry a URL name.

Entries whose URL name does not resolve are left out, so a page another app provides (analytics)
appears in the bar as soon as its URL module is included, and a missing one never shows up as a
dead link.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse

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
]


def nav_links(current_path: str) -> list[dict[str, object]]:
    links = []
    for label, url_name in NAV_ITEMS:
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        active = current_path == url or (url != "/" and current_path.startswith(url))
        links.append({"label": label, "url": url, "active": active})
    return links
