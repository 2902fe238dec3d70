"""W14: what kind of topic a name is, as operators filter them.

RocketMQ 4.9 has no per-topic message type, so kinds come from what the name and config say:
retry (``%RETRY%group``) and DLQ (``%DLQ%group``) topics, system topics (the broker's own, plus the
cluster- and broker-named topics every broker registers), FIFO topics (``order`` set), delay (the
schedule topic holding delayed messages) and transaction (the half / op-half topics holding
prepared messages). Everything else is normal. A topic may have several kinds (the schedule topic
is both system and delay).
"""

from __future__ import annotations

from broker.common.topic_config import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_system_topic,
    reply_topic,
)

NORMAL, RETRY, DLQ, SYSTEM, DELAY, FIFO, TRANSACTION = (
    "normal",
    "retry",
    "dlq",
    "system",
    "delay",
    "fifo",
    "transaction",
)
KINDS = (NORMAL, RETRY, DLQ, SYSTEM, DELAY, FIFO, TRANSACTION)
KIND_LABELS = {
    NORMAL: "Normal",
    RETRY: "Retry",
    DLQ: "DLQ",
    SYSTEM: "System",
    DELAY: "Delay",
    FIFO: "FIFO",
    TRANSACTION: "Transaction",
}
_TRANSACTION_TOPICS = frozenset({TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC})


def cluster_system_topics(clusters: frozenset[str], brokers: frozenset[str]) -> frozenset[str]:
    """The system topics a name server's brokers register beyond TopicValidator's fixed list: one
    named after each cluster and broker, and each cluster's reply topic (``<cluster>_REPLY_TOPIC``)
    (what ``topic_kinds`` takes as ``cluster_and_broker_names``)."""
    return clusters | brokers | frozenset(reply_topic(cluster) for cluster in clusters)


def topic_kinds(
    name: str, order: bool = False, cluster_and_broker_names: frozenset[str] = frozenset()
) -> list[str]:
    kinds = []
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        kinds.append(RETRY)
    if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
        kinds.append(DLQ)
    if is_system_topic(name) or name in cluster_and_broker_names:
        kinds.append(SYSTEM)
    if name == SCHEDULE_TOPIC:
        kinds.append(DELAY)
    if name in _TRANSACTION_TOPICS:
        kinds.append(TRANSACTION)
    if order:
        kinds.append(FIFO)
    return kinds or [NORMAL]
