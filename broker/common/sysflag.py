"""Bits of a stored message's ``sysFlag`` (RocketMQ's MessageSysFlag)."""

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
# Set by RocketMQ 5's clients and brokers: a batch kept whole, and the compression algorithm
# (LZ4 1, ZSTD 2, ZLIB 3 in bits 8-10). Defined, so accepted from a client.
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7
COMPRESSION_TYPE_MASK = 0x7 << 8
DEFINED_FLAGS = 0x7FF  # every bit above names nothing in RocketMQ 4.9 or 5

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


def send_flag_problem(sys_flag: int) -> str | None:
    """Why a client's send may not carry ``sys_flag``, or None. A bit RocketMQ does not define, or
    a commit or rollback type (END_TRANSACTION's to set, and a rolled-back record is never
    consumed), would be stored with SEND_OK and never delivered."""
    undefined = sys_flag & ~DEFINED_FLAGS
    if undefined:
        return (
            f"sysFlag {sys_flag} sets bits RocketMQ does not define "
            f"({undefined & 0xFFFFFFFF:#x}; the defined ones are {DEFINED_FLAGS:#x})"
        )
    kind = transaction_value(sys_flag)
    if kind in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        name = "commit" if kind == TRANSACTION_COMMIT_TYPE else "rollback"
        return f"sysFlag {sys_flag} carries the transaction {name} type, which only END_TRANSACTION sets"
    return None
