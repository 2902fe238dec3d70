"""What the topic pages read: every topic's row, one topic's route, status and consumers, its
running totals for the TPS chart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.queries.topology import listed_members
from console.services.topic_by_set import TopicBySet, topic_by_set
from console.services.vanished_brokers import down_sets, vanished_brokers
from core.boundary import Cluster
from core.cluster_queries import is_system_topic_of, topic_consumers, topic_rows


def all_topics(cluster: Cluster) -> list:
    return topic_rows(cluster.admin)


@dataclass(frozen=True)
class TopicDetail:
    route: Any
    by_set: TopicBySet
    system: bool
    down_sets: Any  # sets the name server dropped: missing from the route


def topic_detail(cluster: Cluster, topic: str) -> TopicDetail:
    admin = cluster.admin
    route = admin.topic_route(topic)
    by_set = topic_by_set(admin, topic, route)  # a set that does not answer costs its rows only
    # Sets the name server dropped are missing from the route: say so rather than let a topic that
    # lost half its queues look whole.
    dropped = down_sets(vanished_brokers(cluster.namesrv, listed_members(cluster)))
    return TopicDetail(route, by_set, is_system_topic_of(admin, topic), dropped)


def topic_counters(cluster: Cluster, topic: str) -> dict[str, int]:
    """Running totals: messages stored in the topic and consumed by each group."""
    status = cluster.admin.topic_status(topic)
    counters = {"produced": sum(q.max_offset for q in status.queues)}
    for consumer in topic_consumers(cluster.admin, topic):
        if not consumer.error:
            counters[f"consumed by {consumer.group}"] = consumer.consumed
    return counters
