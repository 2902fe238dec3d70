"""Attack finding 2: each consume queue took a whole file of disk (6 MB at RocketMQ's default
300,000 entries) as soon as it held one entry, so 2,163 one-message topics took 13 GB. Blocks
are reserved ahead of the write position in chunks instead (the full-disk guarantee: nothing is
written through the mapping where no block is reserved, see tests/store/test_full_disk.py)."""

from __future__ import annotations

from broker.common.message import MessageExt
from broker.store.consume_queue import ConsumeQueue
from broker.store.results import GetMessageStatus

ENTRIES = 300_000  # RocketMQ's default consume-queue file: 6,000,000 bytes


def cq_file_blocks(store, topic: str) -> int:
    """Bytes of disk the queue's files hold (allocated blocks, not their length)."""
    files = store.find_consume_queue(topic, 0).files.files
    return sum(f.path.stat().st_blocks * 512 for f in files)


def put(store, topic: str, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        assert store.put_message(MessageExt(topic=topic, body=b"m%d" % index, queue_id=0)).ok
    assert store.wait_for_dispatch(timeout=10)


def test_a_queue_with_one_entry_holds_one_chunk_of_disk(open_store, tmp_path):
    store = open_store(mapped_file_size_consume_queue=ENTRIES * 20)
    put(store, "OneMessage", 1)
    used = cq_file_blocks(store, "OneMessage")
    print(f"a one-entry consume queue holds {used} bytes of disk ({ENTRIES * 20} before)")
    assert used <= ConsumeQueue.RESERVE_CHUNK


def test_chunks_are_reserved_as_the_queue_grows_and_survive_a_restart(open_store, tmp_path, monkeypatch):
    """A small chunk so a few hundred entries cross several; the store restarts on the files."""
    monkeypatch.setattr(ConsumeQueue, "RESERVE_CHUNK", 4096)  # 204.8 entries a chunk
    store = open_store(tmp_path / "s", mapped_file_size_consume_queue=1000 * 20)
    put(store, "Growing", 700)
    assert cq_file_blocks(store, "Growing") == 4 * 4096  # 700 entries: 14,000 bytes
    store.shutdown()
    again = open_store(tmp_path / "s", mapped_file_size_consume_queue=1000 * 20)
    assert again.get_max_offset_in_queue("Growing", 0) == 700
    put(again, "Growing", 600, start=700)  # crosses into the second file
    assert again.get_max_offset_in_queue("Growing", 0) == 1300
    for offset in (0, 204, 205, 699, 700, 999, 1000, 1299):
        result = again.get_message("g", "Growing", 0, offset, 1)
        assert result.status is GetMessageStatus.FOUND, (offset, result.status)
