"""Pending transactional half messages (B9) and the operator's commit / rollback.

A half message waits in ``RMQ_SYS_TRANS_HALF_TOPIC`` until END_TRANSACTION resolves it; the
broker then writes an op record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` whose body holds the half
message's queue offset(s). Pending = half messages at or after the transaction checker's
progress (the ``CID_RMQ_SYS_TRANS`` offset) that no op record names. The checker re-appends a
still-unknown half message with TRANSACTION_CHECK_TIMES + 1, so only the newest copy per
message id is shown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker.client.admin import MQAdmin
from broker.common import message_const as mc
from broker.common.system_names import TRANSACTION_CHECK_GROUP
from broker.common.topic_config import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

from .reading import LocatedMessage, queue_ranges, read_queue


@dataclass(frozen=True)
class HalfMessage:
    located: LocatedMessage

    @property
    def message(self):
        return self.located.message

    @property
    def producer_group(self) -> str:
        return self.message.get_property(mc.PROPERTY_PRODUCER_GROUP) or ""

    @property
    def real_topic(self) -> str:
        return self.message.get_property(mc.PROPERTY_REAL_TOPIC) or ""

    @property
    def check_times(self) -> int:
        try:
            return int(self.message.get_property(mc.PROPERTY_TRANSACTION_CHECK_TIMES) or 0)
        except ValueError:
            return 0

    @property
    def transaction_id(self) -> str:
        return self.message.get_property(mc.PROPERTY_TRANSACTION_ID) or self.message.client_msg_id

    def age_s(self, now_ms: int | None = None) -> float:
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        return max(0.0, (now_ms - self.message.born_timestamp) / 1000)


def _resolved_offsets(admin: MQAdmin) -> dict[tuple[str, int], set[int]]:
    """(broker, half queue id) → half-queue offsets that op records mark as resolved."""
    resolved: dict[tuple[str, int], set[int]] = {}
    for broker_name, addr, queue_id, low, high in queue_ranges(admin, TRANS_OP_HALF_TOPIC):
        for item in read_queue(admin, addr, broker_name, TRANS_OP_HALF_TOPIC, queue_id, low, high):
            offsets = resolved.setdefault((broker_name, queue_id), set())
            for token in item.message.body.decode("ascii", errors="replace").split(","):
                if token.strip().isdigit():
                    offsets.add(int(token))
    return resolved


def pending_half_messages(admin: MQAdmin, limit: int = 500) -> list[HalfMessage]:
    resolved = _resolved_offsets(admin)
    newest: dict[str, HalfMessage] = {}
    for broker_name, addr, queue_id, low, high in queue_ranges(admin, TRANS_HALF_TOPIC):
        checked = admin.query_consumer_offset(addr, TRANSACTION_CHECK_GROUP, TRANS_HALF_TOPIC, queue_id)
        start = max(low, checked, high - limit * 4)
        done = resolved.get((broker_name, queue_id), set())
        for item in read_queue(admin, addr, broker_name, TRANS_HALF_TOPIC, queue_id, start, high):
            if item.message.queue_offset in done:
                continue
            half = HalfMessage(item)
            key = f"{broker_name}/{half.message.client_msg_id}"
            if key not in newest or newest[key].message.queue_offset < half.message.queue_offset:
                newest[key] = half
    rows = sorted(newest.values(), key=lambda h: h.message.born_timestamp)
    return rows[:limit]


def find_pending(admin: MQAdmin, offset_msg_id: str) -> HalfMessage:
    """The pending half message stored at ``offset_msg_id``; ValueError when it is not one (any
    more), so a stale page never commits a message twice."""
    for half in pending_half_messages(admin):
        if half.message.msg_id == offset_msg_id:
            return half
    raise ValueError(
        f"{offset_msg_id} is not a pending half message (already resolved, or not a half message)"
    )


def end_transaction(admin: MQAdmin, half: HalfMessage, commit: bool) -> None:
    admin.end_transaction(
        half.located.broker_addr,
        half.producer_group,
        half.message.queue_offset,
        half.message.commitlog_offset,
        half.message.client_msg_id,
        commit,
        half.transaction_id,
    )
