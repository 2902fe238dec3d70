"""Saving a config on the broker a form names, or on every master of its cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.client.admin import MQAdmin


def save_on_masters(
    admin: MQAdmin, *, broker_addr: str, cluster: str, save_one: Callable[[str], Any]
) -> list[str]:
    """``save_one(addr)`` on ``broker_addr``, or on every master of ``cluster``; the addresses."""
    addrs = admin.resolve_masters(broker_addr or None, cluster or None)
    for addr in addrs:
        save_one(addr)
    return addrs
