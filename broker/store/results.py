"""Outcomes of store operations, with RocketMQ's status names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from broker.common.message_codec import create_offset_msg_id


class _Status(enum.Enum):
    """A status hashes by identity (members are singletons, compared by identity): Enum's own
    ``__hash__`` is a Python call, paid by every dict lookup keyed by a status (the send and
    pull answers map each put's and get's status to a response code)."""

    __hash__ = object.__hash__


class PutMessageStatus(_Status):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # SYNC_MASTER: no slave confirmed in time (stored)
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # SYNC_MASTER: no slave, or too far behind (stored)
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


# RocketMQ's remarks for these statuses (SendMessageProcessor.handlePutMessageResult), filled
# in by the store so that every processor answering a put passes the same text on.
SERVICE_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's "
    "disk is full [{disk}], messages are put to the slave, message store has been shut down, etc."
)
CREATE_MAPPED_FILE_FAILED_REMARK = "create mapped file failed, server is busy or broken."


def service_not_available(disk_util: str, cause: str) -> PutMessageResult:
    """A put refused while the store does not take writes; ``cause`` says which reason it is."""
    remark = SERVICE_NOT_AVAILABLE_REMARK.format(disk=disk_util)
    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=f"{remark} ({cause})")


def refused_for_role(cause: str) -> PutMessageResult:
    """A put refused for a controller-mode reason only (no role yet, a silent master, an unbound
    HA port): that reason, without RocketMQ's list of disk-full and slave guesses, which would
    point the reader away from it."""
    remark = f"service not available now: {cause}"
    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=remark)


def create_mapped_file_failed(cause: str) -> PutMessageResult:
    """A put whose commit-log segment could not be allocated: nothing was written."""
    return PutMessageResult(
        PutMessageStatus.CREATE_MAPPED_FILE_FAILED, remark=f"{CREATE_MAPPED_FILE_FAILED_REMARK} ({cause})"
    )


@dataclass(slots=True)
class AppendMessageResult:
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    store_host: bytes = b""
    record_offsets: tuple[int, ...] = ()

    @property
    def msg_id(self) -> str:
        """offsetMsgId of each record, comma-separated for a batch (as RocketMQ answers).

        Computed on demand: most callers of the store never look at it."""
        offsets = self.record_offsets
        if len(offsets) == 1:
            return create_offset_msg_id(self.store_host, offsets[0])
        return ",".join(create_offset_msg_id(self.store_host, offset) for offset in offsets)


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append: AppendMessageResult | None = None
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


class GetMessageStatus(_Status):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    # Raw stored records, sent as-is in pull responses (never decoded on this path).
    messages: list[bytes] = field(default_factory=list)
    # Queue offset of each record in ``messages``.
    queue_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.messages)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(m) for m in self.messages)

    def body(self) -> bytes:
        return b"".join(self.messages)
