"""Which name server the console talks to, and the clients every view shares: one admin client and
one SDK producer per name-server address.

``settings.BROKER_NAMESRV`` lists the name servers an operator may pick from, separated by commas;
each entry is RocketMQ's ``host:port;host:port`` failover list of one cluster. The choice lives in
the session (as the dashboard's OPS page keeps it per user), so two operators can look at two
clusters at once. Clients are kept per address: each owns a loop thread and pooled connections,
far too costly to build per request (a producer also sends a heartbeat and fetches routes when it
starts). They are thread-safe; ``close_all`` releases them when the process exits.

Every client the console makes — these, the live tail's readers, the Celery tasks' (which use these)
— signs its requests with ``client_credentials()`` (``ROCKETMQ_ACCESS_KEY`` / ``ROCKETMQ_SECRET_KEY``)
when the brokers run with ACL; the clients are kept per credentials too, so a changed account is
never served by a client of the old one. They connect over TLS as ``client_tls()`` says
(``ROCKETMQ_TLS_*``), and are kept per TLS settings as well.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

from broker.client import ClientTls, Producer, SessionCredentials, TlsConfigError
from broker.client.admin import MQAdmin, MQClientError

SESSION_KEY = "console_namesrv"
# Short enough that an unreachable server gives a page in seconds, not a hung browser tab.
ADMIN_TIMEOUT_SECONDS = 3.0
# The group of the console's producer (test messages, dead-letter replays).
PRODUCER_GROUP = "CONSOLE_PRODUCER"

_ClientKey = tuple[str, SessionCredentials | None, ClientTls]
C = TypeVar("C", MQAdmin, Producer)
_admins: dict[_ClientKey, MQAdmin] = {}
_producers: dict[_ClientKey, Producer] = {}
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


def client_credentials() -> SessionCredentials | None:
    """The ACL account of the console's clients (settings ``ROCKETMQ_ACCESS_KEY`` and
    ``ROCKETMQ_SECRET_KEY``); None, unsigned requests, when neither is set."""
    access_key = getattr(settings, "ROCKETMQ_ACCESS_KEY", "") or ""
    secret_key = getattr(settings, "ROCKETMQ_SECRET_KEY", "") or ""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        # Signing with half an account would only be refused by every broker: say so here.
        missing = "ROCKETMQ_ACCESS_KEY" if not access_key else "ROCKETMQ_SECRET_KEY"
        raise MQClientError(f"ACL credentials need both keys: {missing} is not set")
    return SessionCredentials(access_key, secret_key)


def client_tls() -> ClientTls:
    """How the console's clients connect (settings ``ROCKETMQ_TLS_*``): plaintext unless
    ``ROCKETMQ_TLS_ENABLE``."""
    return ClientTls(
        enable=bool(getattr(settings, "ROCKETMQ_TLS_ENABLE", False)),
        test_mode=bool(getattr(settings, "ROCKETMQ_TLS_TEST_MODE_ENABLE", False)),
        trust_cert_path=getattr(settings, "ROCKETMQ_TLS_TRUST_CERT", "") or "",
        cert_path=getattr(settings, "ROCKETMQ_TLS_CLIENT_CERT", "") or "",
        key_path=getattr(settings, "ROCKETMQ_TLS_CLIENT_KEY", "") or "",
        key_password=getattr(settings, "ROCKETMQ_TLS_CLIENT_KEY_PASSWORD", "") or "",
    )


def _client_error(exc: Exception) -> MQClientError:
    """A TLS setting the console cannot use (a certificate file): a page saying which."""
    return MQClientError(f"the console's TLS settings cannot be used: {exc}")


def _cached(
    cache: dict[_ClientKey, C], addr: str, make: Callable[[str, SessionCredentials | None, ClientTls], C]
) -> C:
    """The client of ``cache`` for ``addr`` and today's credentials and TLS settings, made once
    (a setting changed makes another)."""
    credentials, tls = client_credentials(), client_tls()
    with _lock:
        client = cache.get((addr, credentials, tls))
        if client is None:
            try:
                client = make(addr, credentials, tls)
            except TlsConfigError as exc:
                raise _client_error(exc) from None
            cache[(addr, credentials, tls)] = client
        return client


def admin_for(addr: str) -> MQAdmin:
    def make(addr: str, credentials: SessionCredentials | None, tls: ClientTls) -> MQAdmin:
        return MQAdmin(addr, timeout=ADMIN_TIMEOUT_SECONDS, credentials=credentials, tls=tls)

    return _cached(_admins, addr, make)


def admin_of(request) -> MQAdmin:
    """The admin client of the request's chosen name server."""
    return admin_for(namesrv_of(request))


def producer_for(addr: str) -> Producer:
    def make(addr: str, credentials: SessionCredentials | None, tls: ClientTls) -> Producer:
        return Producer(PRODUCER_GROUP, addr, credentials=credentials, tls=tls).start()

    return _cached(_producers, addr, make)


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
