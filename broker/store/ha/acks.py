"""What a master counts as acknowledged: sends waiting for slaves' confirmations, and how far a
connection's stream has left this process — a report is counted only for bytes that could have
reached the slave (issue 31: a connection reporting 2^62, then the master's live end, confirmed
megabytes still sitting in the master's write buffer)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from broker.store.results import PutMessageStatus


@dataclass(frozen=True, slots=True)
class SlaveProgress:
    """One connected slave as the in-sync set logic sees it."""

    broker_id: int  # -1 (master.UNKNOWN_BROKER_ID) without controller mode
    address: str
    ack_offset: int  # -1 before its first report after the handshake
    last_report_monotonic: float  # time.monotonic() of its latest report (or of connecting)


class AckWaiter:
    """A SYNC_MASTER send (or a caller) waiting for every given slave to confirm ``offset``."""

    __slots__ = ("broker_ids", "future", "offset")

    def __init__(self, offset: int, broker_ids: frozenset[int], future: asyncio.Future) -> None:
        self.offset, self.broker_ids, self.future = offset, broker_ids, future


class Delivery:
    """How far a connection's stream has left this process: the offset after the last transfer
    whose bytes the transport has handed to the socket (-1 before any)."""

    def __init__(self, buffered: Callable[[], int]) -> None:
        self._buffered = buffered  # the transport's get_write_buffer_size
        self._written = 0  # bytes written on this connection since the stream started
        self._marks: deque[tuple[int, int]] = deque()  # (bytes written, offset after them)
        self._delivered = -1

    def wrote(self, size: int, offset_after: int | None = None) -> None:
        """``size`` bytes written; ``offset_after``: the log offset they end at (a transfer)."""
        self._written += size
        if offset_after is not None:
            self._marks.append((self._written, offset_after))

    def delivered(self) -> int:
        handed = self._written - self._buffered()
        marks = self._marks
        while marks and marks[0][0] <= handed:
            self._delivered = marks.popleft()[1]
        return self._delivered


def time_out(future: asyncio.Future[PutMessageStatus]) -> None:
    if not future.done():
        future.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
