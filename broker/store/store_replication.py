"""The store's side of master/slave replication, in one place: what a master reads to send a slave
(``commit_log_data``), a slave's writer of its master's bytes (``replica_log``, the writer itself is
broker/store/replica.py), and a SYNC_MASTER's wait for a slave before a put is answered
(``replica_wait``, set by the HA server in broker/store/ha)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.common.message import MessageExt

from .commitlog import CommitLog
from .replica import ReplicaLog
from .results import PutMessageResult, PutMessageStatus

ReplicaWait = Callable[[int], PutMessageStatus | Awaitable[PutMessageStatus]]


class StoreReplication:
    def __init__(
        self,
        commitlog: CommitLog,
        make_replica_log: Callable[[], ReplicaLog],
        note_appended: Callable[[int], None],
    ) -> None:
        self.commitlog = commitlog
        self._make_replica_log = make_replica_log
        self._note_appended = note_appended  # the checkpoint's physic timestamp follows it
        self._replica_log: ReplicaLog | None = None
        # SYNC_MASTER only (set by the HA server): given a message's end offset, PUT_OK, a
        # slave's failure status, or an awaitable of one once a slave confirms or time runs out.
        self.replica_wait: ReplicaWait | None = None

    def replica_log(self) -> ReplicaLog:
        """A slave's writer of its master's bytes; made once, after recovery (``start``)."""
        if self._replica_log is None:
            self._replica_log = self._make_replica_log()
        return self._replica_log

    def note_replicated(self, store_timestamp: int) -> None:
        """A replicated record's store time (the checkpoint's physic timestamp follows it)."""
        self._note_appended(store_timestamp)

    def commit_log_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` of the commit log from ``offset``, within one segment (what a
        master sends a slave); None when nothing is there yet."""
        mapped = self.commitlog.files.find_file(offset)
        if mapped is None:
            return None
        pos = offset - mapped.file_from_offset
        end = min(mapped.wrote_position, pos + max_bytes)
        return mapped.read(pos, end - pos) if end > pos else None

    def answer_after_slave(
        self,
        result: PutMessageResult,
        batch: list[MessageExt],
        flushed: Awaitable[PutMessageResult] | None,
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """SYNC_MASTER (RocketMQ's handleDiskFlushAndHA): a stored message waiting for its store
        is answered once a slave has confirmed its end too, or with the slave's status;
        ``flushed`` is the put's wait for a SYNC_FLUSH, if it has one."""
        append, replica_wait = result.append, self.replica_wait
        if not result.ok or append is None or not batch[0].wait_store_msg_ok or replica_wait is None:
            return result if flushed is None else flushed
        confirmed = replica_wait(append.wrote_offset + append.wrote_bytes)
        if flushed is None and isinstance(confirmed, PutMessageStatus):
            return _replica_result(result, confirmed)
        return _after_flush_and_replica(result, flushed, confirmed)


def _replica_result(result: PutMessageResult, status: PutMessageStatus) -> PutMessageResult:
    if status is not PutMessageStatus.PUT_OK:  # the slave's status wins, as in RocketMQ
        result.status = status
    return result


async def _after_flush_and_replica(
    result: PutMessageResult,
    flushed: Awaitable[PutMessageResult] | None,
    confirmed: PutMessageStatus | Awaitable[PutMessageStatus],
) -> PutMessageResult:
    if flushed is not None:
        result = await flushed
    status = confirmed if isinstance(confirmed, PutMessageStatus) else await confirmed
    return _replica_result(result, status)
