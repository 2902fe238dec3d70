"""Store benchmark: append, sync-flush and read rates next to the disk's own limits.

    python bench/store.py [--messages N] [--dir DIR] [--json]

Figures for 1 KiB bodies (no keys): ASYNC_FLUSH appends (single and batches of 32), SYNC_FLUSH
with 1 writer and with 32 concurrent writers (group commit) — as asyncio tasks, which is how the
broker's event loop writes, and as OS threads —, reads through ``get_message``, start-up after a
crash that lost the consume queues (every record walked, CRC-checked and dispatched again); and the
same disk's sequential write + fdatasync speed and its small write + fdatasync rate, with ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import disk
from broker.common.message import MessageExt
from broker.store.message_store import MessageStore
from broker.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig

BODY = b"x" * 1024
QUEUES = 4


def _store(directory: Path, flush_type: str) -> MessageStore:
    config = MessageStoreConfig(flush_disk_type=flush_type, mapped_file_size_commit_log=256 * 1024 * 1024)
    store = MessageStore(directory, config)
    store.start()
    return store


def _messages(count: int) -> list[MessageExt]:
    return [MessageExt(topic="bench", body=BODY, queue_id=i % QUEUES) for i in range(count)]


def bench_async_single(directory: Path, count: int) -> dict:
    store = _store(directory, ASYNC_FLUSH)
    messages = _messages(count)
    start = time.perf_counter()
    for msg in messages:
        store.put_message(msg)
    appended = time.perf_counter() - start
    store.wait_for_dispatch(timeout=120)
    dispatched = time.perf_counter() - start
    size = store.max_physic_offset
    read = bench_reads(store, count)
    store.shutdown()
    return {
        "async_single_msgs_s": count / appended,
        "async_single_mb_s": size / appended / 1e6,
        "async_single_dispatched_msgs_s": count / dispatched,
        "read_msgs_s": read,
        "bytes_written": size,
    }


def bench_async_batch(directory: Path, count: int, batch: int = 32) -> dict:
    store = _store(directory, ASYNC_FLUSH)
    batches = [
        [MessageExt(topic="bench", body=BODY, queue_id=q) for _ in range(batch)]
        for q in range(count // batch)
        for q in [q % QUEUES]
    ]
    start = time.perf_counter()
    for group in batches:
        store.put_messages(group)
    appended = time.perf_counter() - start
    store.wait_for_dispatch(timeout=120)
    size = store.max_physic_offset
    store.shutdown()
    sent = len(batches) * batch
    return {"async_batch32_msgs_s": sent / appended, "async_batch32_mb_s": size / appended / 1e6}


def bench_sync(directory: Path, count: int, writers: int) -> float:
    store = _store(directory, SYNC_FLUSH)
    per_writer = count // writers
    barrier = threading.Barrier(writers + 1)

    def write(queue_id: int) -> None:
        messages = [
            MessageExt(topic="bench", body=BODY, queue_id=queue_id % QUEUES) for _ in range(per_writer)
        ]
        barrier.wait()
        for msg in messages:
            assert store.put_message(msg).ok

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    store.shutdown()
    return per_writer * writers / elapsed


def bench_sync_asyncio(directory: Path, count: int, writers: int) -> float:
    """SYNC_FLUSH with ``writers`` concurrent asyncio tasks: how the broker's event loop writes."""

    async def run() -> float:
        store = _store(directory, SYNC_FLUSH)
        per_writer = count // writers

        async def write(queue_id: int) -> None:
            for _ in range(per_writer):
                result = await store.put_message_async(
                    MessageExt(topic="bench", body=BODY, queue_id=queue_id % QUEUES)
                )
                assert result.ok

        start = time.perf_counter()
        await asyncio.gather(*(write(i) for i in range(writers)))
        elapsed = time.perf_counter() - start
        store.shutdown()
        return per_writer * writers / elapsed

    return asyncio.run(run())


def bench_reads(store: MessageStore, count: int) -> float:
    start = time.perf_counter()
    read = 0
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            result = store.get_message("bench", "bench", queue_id, offset, 32)
            if not result.messages:
                break
            read += len(result.messages)
            offset = result.next_begin_offset
    elapsed = time.perf_counter() - start
    assert read == count, f"read back {read} of {count}"
    return read / elapsed


def bench_recovery(directory: Path, count: int) -> float:
    """Start a store over what ``bench_async_single`` wrote as if it had crashed and lost its
    consume queues and checkpoint: recovery verifies every record and re-dispatches all of them."""
    # The crash is staged: the store's warning that it cut the log after an unclean stop is expected.
    logging.getLogger("broker.store.recovery").setLevel(logging.ERROR)
    (directory / "abort").touch()
    shutil.rmtree(directory / "consumequeue", ignore_errors=True)
    (directory / "checkpoint").unlink(missing_ok=True)
    start = time.perf_counter()
    store = _store(directory, ASYNC_FLUSH)
    elapsed = time.perf_counter() - start
    recovered = sum(store.get_max_offset_in_queue("bench", queue_id) for queue_id in range(QUEUES))
    store.shutdown()
    assert recovered == count, f"recovered {recovered} of {count}"
    return count / elapsed


@contextlib.contextmanager
def no_gc():
    """Time without the cyclic garbage collector, as ``timeit`` does: the benchmark keeps every
    pre-built message alive, and full collections over them would be measured as store time."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run(directory: Path, count: int, sync_count: int) -> dict:
    figures: dict = {"messages": count, "body_bytes": len(BODY)}
    with no_gc():
        figures.update(bench_async_single(directory / "async", count))
    with no_gc():
        figures["recover_msgs_s"] = bench_recovery(directory / "async", count)
    with no_gc():
        figures.update(bench_async_batch(directory / "batch", count))
    figures["sync_1_writer_msgs_s"] = bench_sync(directory / "sync1", max(200, sync_count // 8), 1)
    figures["sync_32_writers_msgs_s"] = bench_sync_asyncio(directory / "sync32", sync_count, 32)
    figures["sync_32_threads_msgs_s"] = bench_sync(directory / "sync32t", sync_count, 32)
    figures["disk_seq_write_mb_s"] = disk.sequential_write_mb_s(str(directory), figures["bytes_written"])
    figures["disk_fdatasync_per_s"] = disk.fdatasync_per_s(str(directory))
    figures["ratio_async_vs_disk_mb"] = figures["async_single_mb_s"] / figures["disk_seq_write_mb_s"]
    figures["ratio_sync32_vs_fdatasync"] = figures["sync_32_writers_msgs_s"] / figures["disk_fdatasync_per_s"]
    figures["ratio_sync32_threads_vs_fdatasync"] = (
        figures["sync_32_threads_msgs_s"] / figures["disk_fdatasync_per_s"]
    )
    figures["ratio_sync1_vs_fdatasync"] = figures["sync_1_writer_msgs_s"] / figures["disk_fdatasync_per_s"]
    return figures


def _print_table(figures: dict) -> None:
    aims = {
        "async_single_msgs_s": "aim >= 100,000",
        "ratio_sync32_vs_fdatasync": "aim >= 4",
        "read_msgs_s": "aim >= 200,000",
    }
    for key, value in figures.items():
        shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
        print(f"{key:34s} {shown:>16s}  {aims.get(key, '')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sync-messages", type=int, default=20_000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir under ./var)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(__file__).resolve().parents[1] / "var"
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="bench-store-", dir=base))
    try:
        figures = run(directory, args.messages, args.sync_messages)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(figures))
    else:
        _print_table(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
