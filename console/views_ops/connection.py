"""The console process's clients of the cluster: one admin client and one producer per name server.

Both are thread-safe and reused across requests (a new connection per page view would dominate
page time). The name-server address is ``settings.BROKER_NAMESRV``, read on each call so a change of
address takes effect without a restart.
"""

from __future__ import annotations

import threading

from django.conf import settings

from broker.client import Producer
from broker.client.admin import MQAdmin

REPLAY_PRODUCER_GROUP = "CONSOLE_OPS_PRODUCER"

_lock = threading.Lock()
_admins: dict[str, MQAdmin] = {}
_producers: dict[str, Producer] = {}


def namesrv_addr() -> str:
    return settings.BROKER_NAMESRV


def admin() -> MQAdmin:
    addr = namesrv_addr()
    with _lock:
        client = _admins.get(addr)
        if client is None:
            timeout = float(getattr(settings, "CONSOLE_ADMIN_TIMEOUT", 5))
            client = _admins[addr] = MQAdmin(addr, timeout=timeout)
        return client


def producer() -> Producer:
    addr = namesrv_addr()
    with _lock:
        client = _producers.get(addr)
        if client is None:
            client = _producers[addr] = Producer(REPLAY_PRODUCER_GROUP, addr).start()
        return client


def close_all() -> None:
    """Tests switch name servers between modules; release the old clients."""
    with _lock:
        for client in _admins.values():
            client.close()
        for client in _producers.values():
            client.shutdown()
        _admins.clear()
        _producers.clear()
