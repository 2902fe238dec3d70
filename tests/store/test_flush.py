"""Group commit: one flush serves many writers; a flush slower than the timeout reports it."""

import asyncio
import threading
import time

from broker.store.flush import GroupCommitService


def test_one_flush_completes_every_waiting_writer():
    flushes = []
    gate = threading.Event()

    def flush():
        gate.wait(5)  # hold the first flush so the other requests queue behind it
        flushes.append(1)
        return 1000

    service = GroupCommitService(flush, timeout_ms=5000)
    service.start()
    futures = [service.request(end) for end in (100, 200, 300)]
    time.sleep(0.05)
    futures += [service.request(end) for end in (400, 500)]
    gate.set()
    assert all(f.result(5) for f in futures)
    assert len(flushes) <= 2  # five writers, at most two fsyncs
    service.shutdown()


def test_slow_flush_reports_timeout_to_asyncio_writers():
    def slow_flush():
        time.sleep(0.2)
        return 10_000

    async def scenario():
        service = GroupCommitService(slow_flush, timeout_ms=50)
        service.start()
        outcomes = await asyncio.gather(service.request_async(100), service.request_async(200))
        service.shutdown()
        return outcomes

    assert asyncio.run(scenario()) == [False, False]


def test_failed_flush_fails_the_writers_and_shutdown_refuses_new_ones():
    def broken():
        raise OSError("disk gone")

    service = GroupCommitService(broken)
    service.start()
    future = service.request(10)
    try:
        future.result(5)
        raise AssertionError("expected the flush error")
    except OSError as exc:
        assert "disk gone" in str(exc)
    service.shutdown()
    late = service.request(20)
    assert isinstance(late.exception(1), RuntimeError)
