"""What the consumer group pages read: a page of groups with lag, one group's detail, a reset's
preview."""

from __future__ import annotations

from core.boundary import Cluster
from core.cluster_queries import group_detail, group_index, group_rows, reset_preview


def index(cluster: Cluster):
    """Every group's name (cheap): the list is filtered and paged before anything costly is asked."""
    return group_index(cluster.admin)


def rows(cluster: Cluster, names_index, names: list[str]):
    """Lag, clients and TPS of ``names`` only (the page's groups)."""
    return group_rows(cluster.admin, names_index, names)


def detail(cluster: Cluster, group: str):
    return group_detail(cluster.admin, group)


def preview_reset(cluster: Cluster, group: str, topic: str, timestamp: int):
    """What a reset would do, per queue (read-only)."""
    return reset_preview(cluster.admin, group, topic, timestamp)
