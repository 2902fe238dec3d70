"""A store whose dispatch runs on an event loop (how the broker runs it) instead of a thread."""

import asyncio
import threading

from broker.common.message import MessageExt
from broker.store.message_store import MessageStore

from .conftest import small_config


def readable(store: MessageStore, count_expected: int) -> int:
    result = store.get_message("g", "loop", 0, 0, count_expected + 10)
    return result.message_count


async def test_dispatch_happens_on_the_loop_after_the_appending_handler(tmp_path):
    store = MessageStore(tmp_path / "store", small_config())
    store.start(dispatch_loop=asyncio.get_running_loop())
    seen_threads = set()
    store.add_dispatch_listener(lambda request: seen_threads.add(threading.get_ident()))
    try:
        for i in range(50):
            assert store.put_message(MessageExt(topic="loop", body=b"m%d" % i, queue_id=0)).ok
        # Nothing is dispatched while this handler still runs; the loop does it right after.
        assert readable(store, 50) == 0
        await asyncio.sleep(0)
        assert readable(store, 50) == 50
        assert seen_threads == {threading.get_ident()}
    finally:
        store.shutdown()


async def test_waiting_for_dispatch_on_the_loop_thread_dispatches_instead_of_deadlocking(tmp_path):
    store = MessageStore(tmp_path / "store", small_config())
    store.start(dispatch_loop=asyncio.get_running_loop())
    try:
        store.put_message(MessageExt(topic="loop", body=b"x", queue_id=0))
        assert store.wait_for_dispatch(timeout=1)
        assert readable(store, 1) == 1
        # Another thread waits until the loop dispatches.
        store.put_message(MessageExt(topic="loop", body=b"y", queue_id=0))
        assert await asyncio.to_thread(store.wait_for_dispatch, None, 5)
        assert readable(store, 2) == 2
    finally:
        store.shutdown()


async def test_shutdown_dispatches_what_the_loop_had_not_reached(tmp_path):
    directory = tmp_path / "store"
    store = MessageStore(directory, small_config())
    store.start(dispatch_loop=asyncio.get_running_loop())
    for i in range(20):
        store.put_message(MessageExt(topic="loop", body=b"m%d" % i, queue_id=0))
    appended_to = store.commitlog.max_offset
    assert store.reput.dispatched_offset < appended_to
    store.shutdown()  # before the loop ran the scheduled dispatch
    assert store.reput.dispatched_offset == appended_to
    reopened = MessageStore(directory, small_config())
    reopened.start()
    try:
        assert readable(reopened, 20) == 20
        assert reopened.last_exit_ok
    finally:
        reopened.shutdown()


async def test_listeners_see_the_message_readable_before_its_keys_are_indexed(tmp_path):
    """A held pull (a dispatch listener) is answered before the index work: the consumer's
    answer does not wait for it. Once the dispatch is over the key is found, and a waiter for
    the dispatched offset sees both."""
    store = MessageStore(tmp_path / "store", small_config())
    store.start(dispatch_loop=asyncio.get_running_loop())
    seen = []

    def listener(request) -> None:
        found = store.query_message("loop", "order-7", 10, 0, 2**62)
        seen.append((readable(store, 1), len(found)))

    store.add_dispatch_listener(listener)
    try:
        msg = MessageExt(topic="loop", body=b"x", queue_id=0)
        msg.keys = "order-7"
        assert store.put_message(msg).ok
        assert store.wait_for_dispatch(timeout=1)
        assert seen == [(1, 0)]  # readable, not yet indexed, when the listener ran
        assert len(store.query_message("loop", "order-7", 10, 0, 2**62)) == 1
    finally:
        store.shutdown()
