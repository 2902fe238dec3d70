"""What the operations pages read: dead letters (groups, a group's list, one dead letter, a replay's
dry run), delayed messages by level, pending transactions."""

from __future__ import annotations

from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX
from console.services import delayed, dlq, transactions
from core.boundary import Cluster


def dead_letter_groups(cluster: Cluster) -> list[dict]:
    """Every group with a DLQ topic, and how many dead letters it holds."""
    admin = cluster.admin
    groups = []
    for topic in admin.topic_list():
        if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            status = admin.topic_status(topic)
            count = sum(q.max_offset - q.min_offset for q in status.queues)
            groups.append({"group": topic[len(DLQ_GROUP_TOPIC_PREFIX) :], "count": count})
    return groups


def write_only_brokers(cluster: Cluster, group: str) -> list[str]:
    return dlq.write_only_brokers(cluster.admin, group)


def dead_letters(cluster: Cluster, group: str, flt: dlq.DeadLetterFilter) -> list:
    return dlq.list_dead_letters(cluster.admin, group, flt)


def find_dead_letters(cluster: Cluster, group: str, offset_msg_ids: list[str]):
    """The dead letters named; ValueError naming one that is not there."""
    return dlq.find_dead_letters(cluster.admin, group, offset_msg_ids)


def delay_levels(cluster: Cluster):
    return delayed.delay_status(cluster.admin)


def pending_of_level(cluster: Cluster, broker_name: str, level: int):
    """A delay level's status and pending messages on ``broker_name``'s master (None when no such
    master is listed; ``ValueError`` for a level the broker does not have)."""
    data = cluster.admin.cluster_info().brokers.get(broker_name)
    if data is None or not data.master_addr:
        return None
    return delayed.pending_of_level(cluster.admin, broker_name, data.master_addr, level)


def pending_transactions(cluster: Cluster):
    return transactions.pending_half_messages(cluster.admin)
