"""Delayed messages (RocketMQ's ScheduleMessageService).

A message with a delay level is stored first in ``SCHEDULE_TOPIC_XXXX`` (queue = level - 1) with
its real topic and queue in properties; the store puts its delivery time in the consume-queue tag
field. One timer per level scans its queue every 100 ms and re-writes each due message to its
real topic. Progress per level lives in ``delayOffset.json``.

Ordering that makes a clean restart exact: a message is re-written *before* its level's offset
advances, and the offsets are persisted only after the timers have stopped. A crash between the
re-write and the next persist re-delivers (as RocketMQ); a clean stop neither loses nor repeats.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from broker.common import fastjson
from broker.common import message_const as const
from broker.common.json_config_file import DelayOffsetTable
from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.sysflag import visible_to_consumers
from broker.common.topic_config import SCHEDULE_TOPIC
from broker.remoting.command import RemotingCommand, response_to

log = logging.getLogger(__name__)

TICK_SECONDS = 0.1  # how often each level looks for due messages
_SCAN_BATCH = 32


def to_schedule_message(msg: MessageExt, max_level: int) -> bool:
    """Redirect ``msg`` to the schedule topic when it carries a delay level; True if it did.

    Prepared/rolled-back transaction messages are never delayed (as RocketMQ): only what
    consumers would see is scheduled. A level above
    the highest configured one is clamped to it — that is what makes retries past 16 every 2 h.
    """
    level = msg.delay_time_level
    if level <= 0 or max_level <= 0:
        return False
    if not visible_to_consumers(msg.sys_flag):
        return False
    level = min(level, max_level)
    msg.properties[const.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg.properties[const.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[const.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.topic, msg.queue_id = SCHEDULE_TOPIC, level - 1
    return True


def real_message(scheduled: MessageExt) -> MessageExt | None:
    """The message to deliver for a stored schedule-topic record (None when it names no topic)."""
    props = dict(scheduled.properties)
    topic = props.get(const.PROPERTY_REAL_TOPIC)
    try:
        queue_id = int(props.get(const.PROPERTY_REAL_QUEUE_ID, ""))
    except ValueError:
        return None
    if not topic:
        return None
    props.pop(const.PROPERTY_DELAY_TIME_LEVEL, None)
    props[const.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return scheduled.copy_for_store(
        topic, queue_id, props, prepared_transaction_offset=scheduled.prepared_transaction_offset
    )


class ScheduleMessageService:
    def __init__(self, store, config_dir: Path | str, flush_interval_ms: int = 10_000, clock=time.time):
        self.store = store
        self.levels_ms = store.config.delay_levels_ms()
        self.offsets = DelayOffsetTable(config_dir)
        self.flush_interval_ms = flush_interval_ms
        self.clock = clock
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self.delivered = 0

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def start(self) -> None:
        self.offsets.load()
        self._stopping.clear()
        self._tasks = [asyncio.create_task(self._level_loop(level)) for level in range(1, self.max_level + 1)]
        self._tasks.append(asyncio.create_task(self._persist_loop()))

    async def stop(self) -> None:
        """Let every timer finish the message it is delivering, then persist the offsets."""
        self._stopping.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.offsets.persist()

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def _persist_loop(self) -> None:
        while not self._stopping.is_set():
            await self._pause(self.flush_interval_ms / 1000)
            if not self._stopping.is_set():
                await asyncio.to_thread(self.offsets.persist)  # fsyncs: off the loop

    async def _level_loop(self, level: int) -> None:
        while not self._stopping.is_set():
            try:
                more = await self.deliver_due(level)
            except Exception:
                log.exception("delay level %d: delivery failed; retrying", level)
                more = False
            # A plain sleep: 18 timers ticking 10 times a second must stay cheap; stop() waits at
            # most one tick for them. With a backlog, still yield so the broker keeps serving.
            await asyncio.sleep(0 if more else TICK_SECONDS)

    async def deliver_due(self, level: int) -> bool:
        """Re-write the due messages of ``level``; True when a full batch went (look again at once)."""
        queue = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        if queue is None:
            return False
        offset = max(self.offsets.table.get(level, 0), queue.min_offset)
        entries = queue.read_entries(offset, _SCAN_BATCH)
        now = int(self.clock() * 1000)
        for commitlog_offset, size, deliver_at in entries:
            if self._stopping.is_set() or self._correct(deliver_at, now, level) > now:
                self.offsets.table[level] = offset
                return False
            if not await self._deliver_one(level, offset, commitlog_offset, size):
                self.offsets.table[level] = offset
                return False
            offset += 1
            self.offsets.table[level] = offset
        return len(entries) == _SCAN_BATCH

    def _correct(self, deliver_at: int, now: int, level: int) -> int:
        # A delivery time further away than the level itself means the clock went back: cap it.
        return min(deliver_at, now + self.levels_ms[level - 1])

    async def _deliver_one(self, level: int, queue_offset: int, commitlog_offset: int, size: int) -> bool:
        """True when the entry is done with (delivered, or unreadable and skipped)."""
        record = self.store.select_one_message_by_offset(commitlog_offset, size)
        if record is None:
            log.warning("delay level %d offset %d: message no longer in the commit log", level, queue_offset)
            return True
        try:
            message = real_message(decode_message(record))
        except MessageDecodeError as exc:
            log.error("delay level %d offset %d: undecodable, skipped: %s", level, queue_offset, exc)
            return True
        if message is None:
            log.error("delay level %d offset %d: no REAL_TOPIC/REAL_QID, skipped", level, queue_offset)
            return True
        result = await self.store.put_messages_async([message])
        if not result.ok:
            log.warning(
                "delay level %d: re-writing to %s failed (%s); will retry",
                level,
                message.topic,
                result.status.value,
            )
            return False
        self.delivered += 1
        return True

    def runtime_info(self) -> dict[str, str]:
        """``scheduleMessageOffset_<level>``: delivered up to, of how many (RocketMQ's runtime keys)."""
        info = {}
        for level in range(1, self.max_level + 1):
            queue_max = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            info[f"scheduleMessageOffset_{level}"] = f"{self.offsets.table.get(level, 0)},{queue_max}"
        return info

    async def all_delay_offsets(self, conn, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: the content of delayOffset.json, as RocketMQ answers it."""
        body = {"offsetTable": dict(self.offsets.table)}
        return response_to(request, body=fastjson.dumps(body))
