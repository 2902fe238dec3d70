"""``TransactionalMessageService``: resolve half messages (commit/rollback) and keep track of which
ones are resolved, from the op topic, so the checker and operators never resolve one twice."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.request_headers import EndTransactionRequestHeader
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE
from broker.common.system_names import TRANSACTION_CHECK_GROUP
from broker.store.results import PutMessageResult

from . import half_message as hm

if TYPE_CHECKING:
    from ..controller import BrokerController

log = logging.getLogger(__name__)


@dataclass
class EndResult:
    ok: bool
    remark: str = ""
    put: PutMessageResult | None = None


class TransactionalMessageService:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.store = broker.store
        # Half-queue offsets with an op record, at or after the checker's position.
        self.resolved: set[int] = set()
        # (op queue offset, half queue offset) read from the op queue and not yet passed by the checker.
        self.pending_ops: list[tuple[int, int]] = []
        self._op_read_to = -1

    # -- progress kept as consumer offsets of the system group -----------------------------------
    def half_offset(self) -> int:
        committed = self.broker.offsets.query(TRANSACTION_CHECK_GROUP, tc.TRANS_HALF_TOPIC, hm.HALF_QUEUE_ID)
        return committed if committed >= 0 else self.store.get_min_offset_in_queue(tc.TRANS_HALF_TOPIC, 0)

    def op_offset(self) -> int:
        committed = self.broker.offsets.query(
            TRANSACTION_CHECK_GROUP, tc.TRANS_OP_HALF_TOPIC, hm.HALF_QUEUE_ID
        )
        return committed if committed >= 0 else self.store.get_min_offset_in_queue(tc.TRANS_OP_HALF_TOPIC, 0)

    def commit_progress(self, half_offset: int) -> None:
        """Record that the checker is done with every half message before ``half_offset``."""
        op_offset = self.op_offset()
        self.pending_ops.sort()
        done = 0
        for op_queue_offset, half_queue_offset in self.pending_ops:
            if half_queue_offset >= half_offset:
                break
            op_offset, done = op_queue_offset + 1, done + 1
        del self.pending_ops[:done]
        self.resolved = {offset for offset in self.resolved if offset >= half_offset}
        offsets = self.broker.offsets
        offsets.commit(TRANSACTION_CHECK_GROUP, tc.TRANS_HALF_TOPIC, hm.HALF_QUEUE_ID, half_offset)
        offsets.commit(TRANSACTION_CHECK_GROUP, tc.TRANS_OP_HALF_TOPIC, hm.HALF_QUEUE_ID, op_offset)

    def read_new_ops(self) -> None:
        """Learn the op records written since the last look (after a restart: since the op offset)."""
        queue = self.store.find_consume_queue(tc.TRANS_OP_HALF_TOPIC, hm.HALF_QUEUE_ID)
        if queue is None:
            return
        offset = max(self._op_read_to, self.op_offset(), queue.min_offset)
        while offset < queue.max_offset:
            entries = queue.read_entries(offset, 256)
            if not entries:
                break
            for commitlog_offset, size, _tags in entries:
                half_offset = self._op_half_offset(commitlog_offset, size)
                if half_offset is not None:
                    self.resolved.add(half_offset)
                    self.pending_ops.append((offset, half_offset))
                offset += 1
        self._op_read_to = offset

    def _op_half_offset(self, commitlog_offset: int, size: int) -> int | None:
        record = self.store.select_one_message_by_offset(commitlog_offset, size)
        try:
            return int(decode_message(record).body) if record else None
        except (MessageDecodeError, ValueError):
            log.error("op record at commit-log offset %d is unreadable; ignored", commitlog_offset)
            return None

    def is_resolved(self, half_queue_offset: int) -> bool:
        self.read_new_ops()
        return half_queue_offset in self.resolved or half_queue_offset < self.half_offset()

    # -- END_TRANSACTION ------------------------------------------------------------------------
    def find_half(self, header: EndTransactionRequestHeader) -> MessageExt | str:
        """The half message the request names, or why it cannot be resolved."""
        store = self.store
        half = store.message_starting_at(header.commit_log_offset)
        if half is None or half.topic != tc.TRANS_HALF_TOPIC:
            return "Find prepared transaction message failed"
        if half.properties.get(const.PROPERTY_PRODUCER_GROUP) != header.producer_group:
            return "The producer group wrong"
        # The half topic's consume queue, which only the broker writes, must list this record at
        # that queue offset: a record's own queue offset is what its writer claimed.
        queue_offset = header.tran_state_table_offset
        listed = store.get_commit_log_offset_in_queue(half.topic, half.queue_id, queue_offset)
        if half.queue_offset != queue_offset or listed != header.commit_log_offset:
            return "The transaction state table offset wrong"
        if self.is_resolved(half.queue_offset):
            return (
                f"the half message at queue offset {half.queue_offset} is already committed, rolled "
                "back, or superseded by a newer check"
            )
        return half

    async def commit(self, half: MessageExt) -> EndResult:
        final = hm.final_message(half, TRANSACTION_COMMIT_TYPE, half.commitlog_offset)
        if not final.topic:
            return EndResult(False, "the half message has no REAL_TOPIC")
        put = await self.store.put_messages_async([final])
        if not put.ok:
            return EndResult(False, put.remark or put.status.value, put)
        await self._mark_resolved(half)
        return EndResult(True, put=put)

    async def rollback(self, half: MessageExt) -> EndResult:
        await self._mark_resolved(half)
        return EndResult(True)

    async def _mark_resolved(self, half: MessageExt) -> None:
        op = hm.op_message(half.queue_offset, self._host())
        result = await self.store.put_messages_async([op])
        if not result.ok:
            # The message is resolved; without its op record the checker asks the producer again,
            # which answers with the same outcome — never wrong, only redundant.
            log.error("op record for half offset %d not written: %s", half.queue_offset, result.status.value)
            return
        self.resolved.add(half.queue_offset)

    def _host(self) -> tuple[str, int]:
        return self.broker.config.broker_ip1, self.broker.config.listen_port
