"""The async send window on its own: counts, bytes, order, waiting and giving up."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.client.send_window import SendWindow
from broker.remoting.errors import RemotingTooMuchRequestError
from tests.listener_failures import ListenerFailures


def test_counts_and_bytes_bound_what_enters():
    window = SendWindow(max_messages=3, max_bytes=1000)
    assert window.try_enter(100) and window.try_enter(100) and window.try_enter(100)
    assert not window.try_enter(1)  # three in flight
    window.leave(100)
    assert not window.try_enter(801)  # 200 + 801 bytes
    assert window.try_enter(800)
    assert (window.messages, window.bytes) == (3, 1000)


def test_a_message_over_the_byte_budget_goes_alone():
    window = SendWindow(max_messages=10, max_bytes=1000)
    assert window.try_enter(5000)  # nothing else in flight: sent alone rather than never
    assert not window.try_enter(1)
    window.leave(5000)
    assert window.try_enter(1)
    assert not window.try_enter(5000)


def test_bad_limits_are_refused():
    with pytest.raises(ValueError):
        SendWindow(max_messages=0)
    with pytest.raises(ValueError):
        SendWindow(max_bytes=0)


def test_queued_sends_start_in_arrival_order_as_room_frees():
    async def scenario():
        window = SendWindow(max_messages=10, max_bytes=1000)
        started: list[str] = []
        failures = ListenerFailures()

        def enter(name: str, size: int) -> None:
            window.enter_later(size, 5, lambda: started.append(name), failures.never(f"fail of {name}"))

        enter("a", 600)
        enter("b", 600)  # does not fit next to a
        enter("c", 100)  # would fit, but b came first
        assert started == ["a"] and window.queued == 2
        assert not window.try_enter(1)  # nor may anyone overtake the queue
        window.leave(600)
        assert started == ["a", "b", "c"] and window.queued == 0
        assert (window.messages, window.bytes) == (2, 700)
        failures.check()

    asyncio.run(scenario())


def test_a_queued_send_fails_at_its_timeout_and_frees_those_behind_it():
    async def scenario():
        window = SendWindow(max_messages=10, max_bytes=1000)
        started: list[str] = []
        failed: list[BaseException] = []
        failures = ListenerFailures()
        window.enter_later(900, 5, lambda: started.append("first"), failures.never("fail of first"))
        window.enter_later(900, 0.05, lambda: started.append("big"), failed.append)
        window.enter_later(50, 5, lambda: started.append("small"), failures.never("fail of small"))
        assert started == ["first"]
        assert await failures.wait_until_async(lambda: failed, timeout=10)
        assert isinstance(failed[0], RemotingTooMuchRequestError)
        assert "within 50 ms" in str(failed[0]) and "1 sends (900 bytes) in flight" in str(failed[0])
        assert started == ["first", "small"]  # the expired one no longer holds the queue
        assert window.queued == 0 and (window.messages, window.bytes) == (2, 950)
        failures.check()

    asyncio.run(scenario())


def test_a_blocking_sender_waits_for_room_and_holds_it_until_the_loop_takes_over():
    window = SendWindow(max_messages=1)
    assert window.try_enter(10)
    found_room = threading.Event()
    left: list[float] = []

    def sender() -> None:
        left.append(window.reserve(10, 30))
        found_room.set()

    thread = threading.Thread(target=sender)
    thread.start()
    assert not found_room.wait(0.2)  # no room: still waiting
    window.leave(10)  # (the producer's loop does this as an answer comes)
    assert found_room.wait(10)
    thread.join()
    assert 0 < left[0] <= 30  # what is left of its timeout, for the queue on the loop
    with pytest.raises(RemotingTooMuchRequestError):  # reserved: no room for another thread
        window.reserve(10, 0.05)
    window.arrived(10)  # the send reached the loop, which now counts it
    assert window.try_enter(10) and window.messages == 1


def test_a_blocking_sender_gives_up_at_its_timeout():
    window = SendWindow(max_messages=1)
    assert window.try_enter(10)
    with pytest.raises(RemotingTooMuchRequestError, match="within 50 ms"):
        window.reserve(10, 0.05)
    assert window.messages == 1
    window.leave(10)
    window.reserve(10, 0.05)  # nothing was left reserved by the one that gave up


def test_a_blocking_sender_held_only_by_the_queue_goes_once_the_queue_clears():
    async def scenario() -> None:
        window = SendWindow(max_messages=10, max_bytes=1000)
        assert window.try_enter(600)
        failed: list[BaseException] = []
        failures = ListenerFailures()
        window.enter_later(600, 0.1, failures.never("start of the queued send"), failed.append)  # 1,200 bytes
        found_room = threading.Event()
        # 700 bytes would fit, but nobody overtakes the queue: it waits

        def reserve() -> None:
            window.reserve(100, 30)
            found_room.set()

        thread = threading.Thread(target=reserve)
        thread.start()
        await asyncio.sleep(0.02)
        assert not found_room.is_set()
        assert await failures.wait_until_async(lambda: failed, timeout=10)  # it gives up at its timeout...
        assert await asyncio.to_thread(found_room.wait, 10)  # ...and the thread is told at once
        thread.join()
        failures.check()

    asyncio.run(scenario())
