"""Bits of a stored message's ``sysFlag`` (RocketMQ's MessageSysFlag)."""

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5

_TRANSACTION_MASK = 0x3 << 2
# A record flagged prepared (a transaction not yet ended) or rolled back stays in the commit log
# but takes no consume-queue slot; committed and non-transactional records (half-topic copies,
# whose flag the broker clears, and op records among them) are what consumers read, as in RocketMQ.
_HIDDEN_FROM_CONSUMERS = frozenset({TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE})


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits of ``sys_flag`` (one of the TRANSACTION_* values)."""
    return sys_flag & _TRANSACTION_MASK


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    return (sys_flag & ~_TRANSACTION_MASK) | transaction_type


def visible_to_consumers(sys_flag: int) -> bool:
    """Whether a stored record with ``sys_flag`` takes a consume-queue slot (so pulls see it)."""
    return sys_flag & _TRANSACTION_MASK not in _HIDDEN_FROM_CONSUMERS
