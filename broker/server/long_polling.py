"""Held pulls (RocketMQ's PullRequestHoldService), on the broker's event loop.

A pull that finds nothing is parked here with a callback; the store's dispatch reports each new
message and every pull parked on that queue below the new end is called back at once, in the
same turn of the loop as the send that produced the message: the consumer's answer is built and
written before the producer's. No task or coroutine per held pull: a woken pull costs one call.

A message the pull's filter skips does not wake it, so a queue that grows only by such messages
would keep the pull (and the group's offset) until its hold ends. As RocketMQ's hold service,
``keep_checking`` wakes every pull parked below its queue's end every 5 s (long polling; else
every shortPollingTimeMills): its read then finds nothing matching and answers with the offset
moved past what it skipped, so a caught-up filtered group commits past them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# RocketMQ's PullRequestHoldService waits this long between checks when long polling is on.
CHECK_INTERVAL_MS = 5000

# wake(final): final is True when the pull must be answered now whatever it finds (its time ran
# out, or the broker stops); False when a message arrived: the pull may park again if its read
# still finds nothing (two tags with one hash code).
Wake = Callable[[bool], None]
# accepts(tags_code): may a message with this tag hash answer the pull? (its filter, as RocketMQ's
# isMatchedByConsumeQueue: a message the pull would skip does not wake it)
Accepts = Callable[[int], bool]


class _Parked:
    __slots__ = ("accepts", "offset", "owner", "timer", "wake")

    timer: asyncio.TimerHandle  # set by ``park`` as soon as it is made (the timer names it)

    def __init__(self, offset: int, wake: Wake, accepts: Accepts | None, owner) -> None:
        self.offset, self.wake, self.accepts, self.owner = offset, wake, accepts, owner


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Made on ``loop``'s thread."""
        self.loop = loop
        self._loop_thread_id = threading.get_ident()
        self.waiting: dict[tuple[str, int], list[_Parked]] = {}

    def park(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        wake: Wake,
        accepts: Accepts | None = None,
        owner=None,
    ) -> None:
        """Call ``wake(False)`` once a message at or beyond ``offset`` that ``accepts`` takes is
        dispatched to the queue, or ``wake(True)`` after ``timeout_s`` — whichever comes first,
        exactly once (never, if ``forget(owner)`` comes before)."""
        key = (topic, queue_id)
        parked = _Parked(offset, wake, accepts, owner)
        parked.timer = self.loop.call_later(max(timeout_s, 0), self._expire, key, parked)
        entries = self.waiting.get(key)
        if entries is None:
            self.waiting[key] = [parked]
        else:
            entries.append(parked)

    def notify_from_thread(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> None:
        """Called for each dispatched message, on the loop (the broker dispatches there) or on a
        store thread (then handed to the loop)."""
        if (topic, queue_id) in self.waiting:
            if threading.get_ident() == self._loop_thread_id:
                self.notify(topic, queue_id, max_offset, tags_code)
            else:
                self.loop.call_soon_threadsafe(self.notify, topic, queue_id, max_offset, tags_code)

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """A message was dispatched: the queue now ends at ``max_offset``; ``tags_code`` is the
        new message's tag hash (None: wake whoever waits below the end)."""
        key = (topic, queue_id)
        entries = self.waiting.get(key)
        if not entries:
            return
        woken, still = [], []
        for parked in entries:
            if parked.offset < max_offset and (
                tags_code is None or parked.accepts is None or parked.accepts(tags_code)
            ):
                woken.append(parked)
            else:
                still.append(parked)
        if not woken:
            return
        if still:
            self.waiting[key] = still
        else:
            del self.waiting[key]
        for parked in woken:  # a woken pull may park again (into the new list): see ``wake``
            parked.timer.cancel()
            parked.wake(False)

    def recheck(self, max_offset: Callable[[str, int], int]) -> None:
        """Wake every pull parked below its queue's end (``max_offset(topic, queue_id)``), whatever
        its filter says of the messages there (RocketMQ's checkHoldRequest)."""
        for topic, queue_id in list(self.waiting):
            self.notify(topic, queue_id, max_offset(topic, queue_id))

    async def keep_checking(
        self, interval_ms: Callable[[], int], max_offset: Callable[[str, int], int]
    ) -> None:
        """``recheck`` every ``interval_ms()`` (read each time: the setting may change live)."""
        while True:
            # At least 100 ms: a shortPollingTimeMills of 0 would otherwise spin the loop.
            await asyncio.sleep(max(interval_ms(), 100) / 1000)
            try:
                self.recheck(max_offset)
            except Exception:
                log.exception("checking held pulls failed")

    def _expire(self, key: tuple[str, int], parked: _Parked) -> None:
        entries = self.waiting.get(key)
        if entries is None or parked not in entries:
            return
        entries.remove(parked)
        if not entries:
            del self.waiting[key]
        parked.wake(True)

    def forget(self, owner) -> int:
        """Drop the pulls ``owner`` (a connection) parked, unanswered: its peer is gone. Returns
        how many there were."""
        dropped = 0
        for key, entries in list(self.waiting.items()):
            gone = [parked for parked in entries if parked.owner is owner]
            for parked in gone:
                parked.timer.cancel()
                entries.remove(parked)
            if not entries:
                del self.waiting[key]
            dropped += len(gone)
        return dropped

    def wake_all(self) -> None:
        """Answer every held pull now (the broker stops)."""
        waiting, self.waiting = self.waiting, {}
        for entries in waiting.values():
            for parked in entries:
                parked.timer.cancel()
                parked.wake(True)

    @property
    def held_count(self) -> int:
        return sum(len(entries) for entries in self.waiting.values())
