"""Held pulls (RocketMQ's PullRequestHoldService), on the broker's event loop.

A pull that finds nothing waits here; the store's dispatch thread reports each new message and
every pull waiting on that queue below the new end wakes at once to read it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Made on ``loop``'s thread."""
        self.loop = loop
        self._loop_thread_id = threading.get_ident()
        self.waiting: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = defaultdict(list)

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a message at or beyond ``offset``; True when woken."""
        future = self.loop.create_future()
        key = (topic, queue_id)
        self.waiting[key].append((offset, future))
        # A timer that settles the future: lighter than asyncio.wait_for (its own waiter and
        # callbacks), and a woken pull resumes one step sooner.
        timer = self.loop.call_later(timeout_s, _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            entries = self.waiting.get(key)
            if entries is not None:
                entries[:] = [e for e in entries if e[1] is not future]
                if not entries:
                    self.waiting.pop(key, None)

    def notify_from_thread(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Called for each dispatched message, on the loop (the broker dispatches there: the
        held pull is answered in the same turn) or on a store thread."""
        if (topic, queue_id) in self.waiting:
            if threading.get_ident() == self._loop_thread_id:
                self.notify(topic, queue_id, max_offset)
            else:
                self.loop.call_soon_threadsafe(self.notify, topic, queue_id, max_offset)

    def notify(self, topic: str, queue_id: int, max_offset: int) -> None:
        for offset, future in self.waiting.get((topic, queue_id), []):
            if offset < max_offset and not future.done():
                future.set_result(True)

    def wake_all(self) -> None:
        for entries in self.waiting.values():
            for _, future in entries:
                if not future.done():
                    future.set_result(True)


def _settle(future: asyncio.Future, woken: bool) -> None:
    if not future.done():
        future.set_result(woken)
