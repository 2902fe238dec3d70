"""Consumer and producer groups RocketMQ's brokers and tools use for themselves (MixAll's names)."""

from __future__ import annotations

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # admin tools' pulls (queryMsg, printMsg, the console)
TRANSACTION_CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # the transaction checker's progress in op-half
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # clients' own sends (an orderly send-back)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

SYSTEM_GROUPS = frozenset(
    {
        TOOLS_CONSUMER_GROUP,
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        CLIENT_INNER_PRODUCER_GROUP,
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        TRANSACTION_CHECK_GROUP,
    }
)


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)
