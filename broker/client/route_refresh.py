"""A producer's routes followed at once when a send says they may be stale.

After a failover a topic's route names a master that is gone (the connection fails) or that is a
slave now (it answers that it takes no writes). RocketMQ's client learns of the new master only
at its next periodic poll of the name servers (pollNameServerInterval, 30 s by default; it asks
at once only when it has no usable route at all), and until then its sends fail. This client
asks the name servers for that topic's route as soon as a send fails in one of those ways, at
most once per topic per second (a burst of failing sends shares one request), so a producer
resumes as soon as the new master has registered. The periodic poll stays as it is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from broker.common.codes import ResponseCode
from broker.remoting.errors import RemotingError, RemotingTooMuchRequestError

from .errors import MQBrokerError, MQClientError

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 1.0  # per topic, between two refreshes a failure asks for

# Broker answers meaning "this broker takes no writes now": a slave's store (RocketMQ's "message
# store is slave mode"), a master fenced or out of its lease, a full disk; a broker whose write
# permission was taken away (the name server's route says so too); and a broker without the topic
# the route says it serves (a replacement that has not received the set's topics yet).
_REFUSED_WRITES = frozenset(
    {ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.NO_PERMISSION, ResponseCode.TOPIC_NOT_EXIST}
)


class NoMasterError(MQClientError):
    """The routes name no master for the broker set a queue is on (gone, or none elected yet)."""


def route_may_be_stale(error: BaseException) -> bool:
    """Whether a failed send suggests the broker set's master has moved: the broker could not be
    reached or answered in time, or it takes no writes, or the routes name no master for it. Not
    a send this client held back itself (too many in flight)."""
    if isinstance(error, NoMasterError):
        return True
    if isinstance(error, MQBrokerError):
        return error.response_code in _REFUSED_WRITES
    return isinstance(error, RemotingError) and not isinstance(error, RemotingTooMuchRequestError)


class RouteSource(Protocol):
    """What a refresher uses of an ``MQClientInstance``."""

    master_addrs: dict[str, str]

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task | None: ...

    async def route(self, topic: str, refresh: bool = False) -> Any: ...


class RouteRefresher:
    """Refreshes one instance's topic routes after failed sends, at most once per topic per
    ``min_interval_s``; ``on_master_moved(broker_name)`` hears of each broker set whose master
    address a refresh changed."""

    def __init__(
        self,
        instance: RouteSource,
        on_master_moved: Callable[[str], None] | None = None,
        min_interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance
        self.on_master_moved = on_master_moved
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._last: dict[str, tuple[float, asyncio.Task]] = {}  # topic -> when asked, the refresh
        self.refreshes = 0  # how many were asked of the name servers

    def after_failure(self, topic: str, error: BaseException) -> asyncio.Task | None:
        """On the instance's loop, after a send to ``topic`` failed with ``error``: the refresh
        its route gets (started now, or the one of the last second, maybe over); None when the
        error says nothing of the route."""
        if not route_may_be_stale(error):
            return None
        return self.refresh(topic)

    def refresh(self, topic: str) -> asyncio.Task | None:
        """On the instance's loop: a refresh of ``topic``'s route, unless one was asked within
        the last ``min_interval_s`` (that one is returned); None as the instance shuts down."""
        now = self.clock()
        last = self._last.get(topic)
        if last is not None and (now - last[0] < self.min_interval_s or not last[1].done()):
            return last[1]
        task = self.instance.spawn(self._refresh(topic))
        if task is not None:
            self._last[topic] = (now, task)
            self.refreshes += 1
        return task

    async def _refresh(self, topic: str) -> None:
        instance = self.instance
        before = dict(instance.master_addrs)
        try:
            await instance.route(topic, refresh=True)
        except (MQClientError, RemotingError) as exc:  # the name servers: the next failure asks again
            log.info("route of %s not refreshed after a failed send: %s", topic, exc)
            return
        if self.on_master_moved is not None:
            for name, addr in before.items():
                moved_to = instance.master_addrs.get(name)
                if moved_to is not None and moved_to != addr:
                    self.on_master_moved(name)


async def wait_for(refresh: asyncio.Task | None) -> None:
    """Wait for a refresh to end; its failure was logged, and a waiter's cancellation does not
    cancel it for the others (``shield``)."""
    if refresh is not None and not refresh.done():
        try:
            await asyncio.shield(refresh)
        except Exception:  # not one it expects (those it logs): the send goes on with the route it has
            log.exception("route refresh failed")
