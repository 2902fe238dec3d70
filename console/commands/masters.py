"""Saving a config on the broker a form names, or on every master of its cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.boundary import Cluster, Params


def save_on_masters(
    cluster: Cluster, params: Params, *, broker_addr: str, cluster_name: str, save_one: Callable[[str], Any]
) -> list[str]:
    """``save_one(addr)`` on the master ``broker_addr`` names (one the chosen name server lists),
    or on every master of ``cluster_name``; the addresses."""
    addrs = cluster.broker_targets(params, broker_addr, cluster_name, masters=True)
    for addr in addrs:
        save_one(addr)
    return addrs
