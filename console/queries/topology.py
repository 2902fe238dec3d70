"""Figures of the cluster's layout that several pages' forms offer: its clusters and its masters."""

from __future__ import annotations

from dataclasses import dataclass

from console.metrics import collector_for
from console.services.overview import overview
from core.boundary import Cluster
from core.cluster_access import namesrv_choices


@dataclass(frozen=True)
class Layout:
    clusters: list[str]
    masters: list[tuple[str, str]]  # (broker name, master address), sorted


def layout(cluster: Cluster) -> Layout:
    info = cluster.admin.cluster_info()
    masters = sorted((b.broker_name, b.master_addr) for b in info.brokers.values() if b.master_addr)
    return Layout(sorted(info.clusters), masters)


def listed_members(cluster: Cluster) -> set[tuple[str, int]]:
    """(broker name, broker id) of every member the name server lists now."""
    brokers = cluster.admin.cluster_info().brokers.values()
    return {(data.broker_name, broker_id) for data in brokers for broker_id in data.broker_addrs}


def overview_sections(cluster: Cluster) -> dict:
    """The home page's sections for the cluster (each read on its own: one failure leaves the
    others shown)."""
    return overview(cluster.admin, cluster.namesrv)


def metrics_collector(namesrv: str):
    """The Prometheus collector of ``namesrv``'s cluster (one per name server, kept)."""
    return collector_for(Cluster(namesrv).admin, namesrv)


def configured_namesrvs() -> list[str]:
    """The name servers settings offer (``BROKER_NAMESRV``), first the default."""
    return namesrv_choices()
