"""The broker's loop lag and request backlog, as RocketMQ's thread-pool queue figures."""

import asyncio
import time
from collections import Counter

import pytest

from broker.common.codes import RequestCode as RC
from broker.server.loop_lag import LoopLagMonitor
from broker.server.request_queues import queue_figures


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ObservedMonitor(LoopLagMonitor):
    """Lets a test wait for the next tick."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ticked = asyncio.Event()

    def _tick(self) -> None:
        super()._tick()
        self.ticked.set()

    async def next_tick(self) -> int:
        self.ticked.clear()
        await self.ticked.wait()
        return self.lag_ms


async def test_lag_is_how_much_later_than_due_the_timer_ran_in_whole_ms():
    clock = Clock()
    monitor = ObservedMonitor(asyncio.get_running_loop(), interval_s=0.01, clock=clock)
    monitor.start()
    try:
        clock.now += 0.01 + 0.2504  # the loop was busy: the tick came 250.4 ms late
        assert await monitor.next_tick() == 250
        clock.now += 0.01 + 0.0007  # late by less than the loop's timer resolution
        assert await monitor.next_tick() == 0
    finally:
        monitor.stop()
    monitor.ticked.clear()
    await asyncio.sleep(0.05)
    assert not monitor.ticked.is_set()  # stopped: no tick comes any more


async def test_a_loop_held_by_a_blocking_call_shows_as_lag():
    monitor = ObservedMonitor(asyncio.get_running_loop(), interval_s=0.01)
    monitor.start()
    try:
        time.sleep(0.3)  # the loop can run nothing meanwhile, as under a long request
        assert await monitor.next_tick() >= 250  # the tick that was due during the sleep
    finally:
        monitor.stop()


async def test_the_interval_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        LoopLagMonitor(asyncio.get_running_loop(), interval_s=0)


def test_waiting_requests_are_counted_in_the_pool_rocketmq_serves_them_from():
    waiting = Counter(
        {
            RC.SEND_MESSAGE: 2,
            RC.SEND_MESSAGE_V2: 1,
            RC.SEND_BATCH_MESSAGE: 1,
            RC.CONSUMER_SEND_MSG_BACK: 1,
            RC.PULL_MESSAGE: 3,
            RC.QUERY_MESSAGE: 1,
            RC.VIEW_MESSAGE_BY_ID: 1,
            RC.END_TRANSACTION: 2,
            RC.HEART_BEAT: 7,  # served by no pool RocketMQ reports
        }
    )
    assert queue_figures(waiting, 42) == {
        "sendThreadPoolQueueSize": "5",
        "pullThreadPoolQueueSize": "3",
        "queryThreadPoolQueueSize": "2",
        "EndTransactionQueueSize": "2",
        "sendThreadPoolQueueHeadWaitTimeMills": "42",
        "pullThreadPoolQueueHeadWaitTimeMills": "42",
        "queryThreadPoolQueueHeadWaitTimeMills": "42",
    }
    assert queue_figures(Counter(), 0)["sendThreadPoolQueueSize"] == "0"


async def test_the_peak_is_the_longest_lag_of_the_last_minute():
    clock = Clock()
    monitor = ObservedMonitor(asyncio.get_running_loop(), interval_s=0.01, clock=clock)
    monitor.start()
    try:
        assert monitor.peak_ms() == 0
        clock.now += 0.01 + 0.1204
        assert await monitor.next_tick() == 120
        clock.now += 0.01
        assert await monitor.next_tick() == 0
        assert monitor.peak_ms() == 120  # still seen after a punctual tick
        clock.now += 61  # a minute later the late tick is forgotten (this one is late too)
        late = await monitor.next_tick()
        assert monitor.peak_ms() == late and late > 60_000
    finally:
        monitor.stop()
