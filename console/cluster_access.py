"""Which name server the console talks to, and the clients every view shares: one admin client and
one SDK producer per name-server address.

``settings.BROKER_NAMESRV`` lists the name servers an operator may pick from, separated by commas;
each entry is RocketMQ's ``host:port;host:port`` failover list of one cluster. The choice lives in
the session (as the dashboard's OPS page keeps it per user), so two operators can look at two
clusters at once. Clients are kept per address: each owns a loop thread and pooled connections,
far too costly to build per request (a producer also sends a heartbeat and fetches routes when it
starts). They are thread-safe; ``close_all`` releases them when the process exits.
"""

from __future__ import annotations

import atexit
import threading

from django.conf import settings

from broker.client import Producer
from broker.client.admin import MQAdmin, MQClientError

SESSION_KEY = "console_namesrv"
# Short enough that an unreachable server gives a page in seconds, not a hung browser tab.
ADMIN_TIMEOUT_SECONDS = 3.0
# The group of the console's producer (test messages, dead-letter replays).
PRODUCER_GROUP = "CONSOLE_PRODUCER"

_admins: dict[str, MQAdmin] = {}
_producers: dict[str, Producer] = {}
_lock = threading.Lock()


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


def namesrv_of(request) -> str:
    """The request's name server; an ``MQClientError`` (a page saying so) when none is configured."""
    addr = current_namesrv(request)
    if not addr:
        raise MQClientError("no name server configured: set BROKER_NAMESRV")
    return addr


def admin_for(addr: str) -> MQAdmin:
    with _lock:
        admin = _admins.get(addr)
        if admin is None:
            admin = _admins[addr] = MQAdmin(addr, timeout=ADMIN_TIMEOUT_SECONDS)
        return admin


def admin_of(request) -> MQAdmin:
    """The admin client of the request's chosen name server."""
    return admin_for(namesrv_of(request))


def producer_for(addr: str) -> Producer:
    with _lock:
        producer = _producers.get(addr)
        if producer is None:
            producer = _producers[addr] = Producer(PRODUCER_GROUP, addr).start()
        return producer


def producer_of(request) -> Producer:
    """The producer of the request's chosen name server."""
    return producer_for(namesrv_of(request))


def close_all() -> None:
    """Close every cached client (tests switching clusters, process exit)."""
    with _lock:
        producers, admins = list(_producers.values()), list(_admins.values())
        _producers.clear()
        _admins.clear()
    for producer in producers:
        producer.shutdown()
    for admin in admins:
        admin.close()


atexit.register(close_all)
