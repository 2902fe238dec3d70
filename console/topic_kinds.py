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
    SYSTEM_TOPICS,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
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
# Consumer groups the brokers and tools use for themselves, as RocketMQ's MixAll names them.
SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
    }
)


def topic_kinds(
    name: str, order: bool = False, cluster_and_broker_names: frozenset[str] = frozenset()
) -> list[str]:
    kinds = []
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        kinds.append(RETRY)
    if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
        kinds.append(DLQ)
    if name in SYSTEM_TOPICS or name in cluster_and_broker_names or name.startswith("rmq_sys_"):
        kinds.append(SYSTEM)
    if name == SCHEDULE_TOPIC:
        kinds.append(DELAY)
    if name in _TRANSACTION_TOPICS:
        kinds.append(TRANSACTION)
    if order:
        kinds.append(FIFO)
    return kinds or [NORMAL]


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith("CID_RMQ_SYS_")
