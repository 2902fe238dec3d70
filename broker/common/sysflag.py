"""Bits of a stored message's ``sysFlag`` (RocketMQ's MessageSysFlag)."""

import zlib

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
# Set by RocketMQ 5's clients and brokers: a batch kept whole, and the compression algorithm
# (LZ4 1, ZSTD 2, ZLIB 3 in bits 8-10). Defined; the batch flags are refused on a send
# (send_flag_problem) and a compression type must match the body (compressed_body_problem).
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


# The first bytes of a compressed body by algorithm (bits 8-10; 0 is RocketMQ 4.9's zlib): an
# LZ4 frame and a Zstandard frame begin with their magic numbers, a zlib stream with its header.
_LZ4, _ZSTD, _ZLIB = 1, 2, 3
_FRAME_MAGIC = {_LZ4: b"\x04\x22\x4d\x18", _ZSTD: b"\x28\xb5\x2f\xfd"}
_BATCH_FLAGS = NEED_UNWRAP_FLAG | INNER_BATCH_FLAG


def compressed_body_problem(sys_flag: int, body: bytes) -> str | None:
    """Why ``body`` is not what COMPRESSED in ``sys_flag`` says, or None. A body flagged compressed
    that does not decompress fails every consumer that reads it, again at each retry. Checked:
    the algorithm is a defined one and the body starts as its stream does (a zlib stream's
    header and first bytes inflate); the whole body is not inflated, which would cost a send as
    much as the consumer's read and let a small body inflate to gigabytes."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    algorithm = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if algorithm in _FRAME_MAGIC:
        ok = body.startswith(_FRAME_MAGIC[algorithm])
    elif algorithm in (0, _ZLIB):
        ok = _zlib_starts(body)
    else:
        return f"sysFlag {sys_flag} names compression type {algorithm}, which RocketMQ does not define"
    if ok:
        return None
    name = {_LZ4: "LZ4", _ZSTD: "Zstandard"}.get(algorithm, "zlib")
    return f"sysFlag {sys_flag} marks the body compressed ({name}), but the body is no {name} stream"


def _zlib_starts(body: bytes) -> bool:
    try:
        zlib.decompressobj().decompress(body[:64], 1)
    except zlib.error:
        return False
    return len(body) >= 2


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
    if sys_flag & _BATCH_FLAGS:
        # The broker stores each message of a batch on its own (it has no batch consume queues):
        # a message flagged as a batch to unwrap would be decoded as one by every consumer.
        return (
            f"sysFlag {sys_flag} marks an inner batch ({_BATCH_FLAGS:#x}); this broker stores each "
            "message on its own and takes no inner batches"
        )
    kind = transaction_value(sys_flag)
    if kind in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        name = "commit" if kind == TRANSACTION_COMMIT_TYPE else "rollback"
        return f"sysFlag {sys_flag} carries the transaction {name} type, which only END_TRANSACTION sets"
    return None
