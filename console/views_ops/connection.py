"""The operations pages' clients of the cluster: the console's shared admin clients (one per name
server, ``console.cluster_access``) and one replay producer per name server.

Producers are thread-safe and reused: starting one per request would dominate page time. The name
server is the one the operator picked for the session (``cluster_access.current_namesrv``).
"""

from __future__ import annotations

import threading

from broker.client import Producer
from broker.client.admin import MQAdmin, MQAdminError
from console import cluster_access

REPLAY_PRODUCER_GROUP = "CONSOLE_OPS_PRODUCER"

_lock = threading.Lock()
_producers: dict[str, Producer] = {}


def namesrv_of(request) -> str:
    addr = cluster_access.current_namesrv(request)
    if not addr:
        raise MQAdminError("no name server configured: set BROKER_NAMESRV")
    return addr


def admin(request) -> MQAdmin:
    return cluster_access.admin_for(namesrv_of(request))


def producer_for(namesrv_addr: str) -> Producer:
    with _lock:
        client = _producers.get(namesrv_addr)
        if client is None:
            client = _producers[namesrv_addr] = Producer(REPLAY_PRODUCER_GROUP, namesrv_addr).start()
        return client


def producer(request) -> Producer:
    return producer_for(namesrv_of(request))


def close_all() -> None:
    """Release every client (tests switch clusters between modules)."""
    with _lock:
        producers = list(_producers.values())
        _producers.clear()
    for client in producers:
        client.shutdown()
    cluster_access.close_all()
