"""The address a login attempt comes from, for login throttling (django-axes' AXES_CLIENT_IP_CALLABLE).

Directly reached, it is the socket's peer (REMOTE_ADDR). Behind ``CONSOLE_TRUSTED_PROXY_COUNT``
reverse proxies each appends the address it saw to ``X-Forwarded-For``, so the client's is the
N-th entry from the right: entries further left were written by the client itself and prove
nothing. A header that is missing, too short or not an address falls back to REMOTE_ADDR.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_address(request) -> str | None:
    remote = request.META.get("REMOTE_ADDR")
    proxies = settings.CONSOLE_TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < proxies:
        return remote
    candidate = forwarded[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
