"""Delayed messages (B7) as the console sees them: per level of every master broker, how many
messages wait in ``SCHEDULE_TOPIC_XXXX`` (queue = level - 1), when the next one is due, and the
pending messages themselves.

Pending = the level queue's max offset - the level's delay progress (the offset its timer has
delivered up to), which the broker reports with GET_ALL_DELAY_OFFSET, as RocketMQ's dashboard
reads it. A message is due at its store time + the level's delay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker.client.admin import MQAdmin, MQBrokerError, MQClientError
from broker.common import message_const as mc
from broker.common.delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels
from broker.common.topic_config import SCHEDULE_TOPIC

from .reading import LocatedMessage, read_queue


def parse_levels(text: str) -> list[tuple[str, int]]:
    """RocketMQ's ``messageDelayLevel`` ("1s 5s … 2h") → [(label, milliseconds)], level 1 first,
    parsed as the store parses it (``broker.common.delay_levels``)."""
    return list(zip(text.split(), parse_delay_levels(text), strict=True))


@dataclass(frozen=True)
class LevelStatus:
    broker_name: str
    broker_addr: str
    level: int
    label: str
    delay_ms: int
    progress: int
    max_offset: int
    next_due_ms: int | None

    @property
    def pending(self) -> int:
        return max(0, self.max_offset - self.progress)


@dataclass(frozen=True)
class BrokerDelayStatus:
    broker_name: str
    broker_addr: str
    levels: list[LevelStatus]
    error: str = ""


@dataclass(frozen=True)
class PendingDelayed:
    located: LocatedMessage
    level: int
    due_ms: int

    @property
    def real_topic(self) -> str:
        return self.located.message.get_property(mc.PROPERTY_REAL_TOPIC) or ""

    @property
    def real_queue_id(self) -> str:
        return self.located.message.get_property(mc.PROPERTY_REAL_QUEUE_ID) or ""


def broker_levels(admin: MQAdmin, addr: str) -> list[tuple[str, int]]:
    config = admin.broker_config(addr)
    return parse_levels(config.get("messageDelayLevel") or DEFAULT_DELAY_LEVELS)


def delay_status(admin: MQAdmin) -> list[BrokerDelayStatus]:
    info = admin.cluster_info()
    result = []
    for broker_name, data in sorted(info.brokers.items()):
        addr = data.master_addr
        if not addr:
            continue
        try:
            result.append(BrokerDelayStatus(broker_name, addr, _levels_of(admin, broker_name, addr)))
        except MQClientError as exc:
            result.append(BrokerDelayStatus(broker_name, addr, [], error=str(exc)))
    return result


def _levels_of(admin: MQAdmin, broker_name: str, addr: str) -> list[LevelStatus]:
    progress = admin.delay_offsets(addr)
    rows = []
    for level, (label, delay_ms) in enumerate(broker_levels(admin, addr), start=1):
        high = _max_offset(admin, addr, level - 1)
        done = progress.get(level, 0)
        next_due = None
        if high > done:
            head = admin.pull_messages(addr, SCHEDULE_TOPIC, level - 1, done, 1)
            if head.messages:
                next_due = head.messages[0].store_timestamp + delay_ms
        rows.append(LevelStatus(broker_name, addr, level, label, delay_ms, done, high, next_due))
    return rows


def _max_offset(admin: MQAdmin, addr: str, queue_id: int) -> int:
    try:
        return admin.max_offset(addr, SCHEDULE_TOPIC, queue_id)
    except MQBrokerError:
        return 0  # the level queue does not exist until a message of that level arrives


def pending_of_level(
    admin: MQAdmin, broker_name: str, addr: str, level: int, limit: int = 200
) -> tuple[LevelStatus, list[PendingDelayed]]:
    levels = _levels_of(admin, broker_name, addr)
    if not 1 <= level <= len(levels):
        raise ValueError(f"level {level} does not exist on {broker_name}: it has levels 1..{len(levels)}")
    status = levels[level - 1]
    end = min(status.max_offset, status.progress + limit)
    located = read_queue(admin, addr, broker_name, SCHEDULE_TOPIC, level - 1, status.progress, end)
    rows = [PendingDelayed(item, level, item.message.store_timestamp + status.delay_ms) for item in located]
    return status, rows


def now_ms() -> int:
    return int(time.time() * 1000)
