"""Which name server the console talks to, and one shared admin client per name-server address.

``settings.BROKER_NAMESRV`` lists the name servers an operator may pick from, separated by commas;
each entry is RocketMQ's ``host:port;host:port`` failover list of one cluster. The choice lives in
the session (as the dashboard's OPS page keeps it per user), so two operators can look at two
clusters at once. Admin clients are kept per address: each owns a loop thread and pooled connections,
far too costly to build per request.
"""

from __future__ import annotations

import threading

from django.conf import settings

from broker.client.admin import MQAdmin

SESSION_KEY = "console_namesrv"
# Short enough that an unreachable server gives a page in seconds, not a hung browser tab.
ADMIN_TIMEOUT_SECONDS = 3.0

_admins: dict[str, MQAdmin] = {}
_admins_lock = threading.Lock()


def namesrv_choices() -> list[str]:
    raw = getattr(settings, "BROKER_NAMESRV", "") or ""
    return [entry.strip() for entry in raw.split(",") if entry.strip()]


def current_namesrv(request) -> str:
    """The session's choice when it is still offered, else the first configured entry."""
    choices = namesrv_choices()
    chosen = request.session.get(SESSION_KEY)
    if chosen in choices:
        return chosen
    return choices[0] if choices else ""


def select_namesrv(request, addr: str) -> None:
    if addr not in namesrv_choices():
        raise ValueError(f"{addr!r} is not one of the configured name servers (BROKER_NAMESRV)")
    request.session[SESSION_KEY] = addr


def admin_for(addr: str) -> MQAdmin:
    with _admins_lock:
        admin = _admins.get(addr)
        if admin is None:
            admin = _admins[addr] = MQAdmin(addr, timeout=ADMIN_TIMEOUT_SECONDS)
        return admin


def admin_of(request) -> MQAdmin:
    """The admin client of the request's chosen name server."""
    return admin_for(current_namesrv(request))


def close_all() -> None:
    """Close every cached client (tests, process shutdown)."""
    with _admins_lock:
        admins = list(_admins.values())
        _admins.clear()
    for admin in admins:
        admin.close()
