"""Shared by the damaged-commit-log tests and their crash child: 1 MiB segments, 1 KiB messages,
100 bytes overwritten, and a consumer's view of what survived."""

from __future__ import annotations

import shutil
from pathlib import Path

from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.store.results import GetMessageStatus

GEOMETRY = {
    "mapped_file_size_commit_log": 1024 * 1024,
    "mapped_file_size_consume_queue": 2_000 * 20,
    "max_hash_slot_num": 4096,
    "max_index_num": 40_000,
}
TOPIC = "damaged"
QUEUES = 4
DAMAGE = b"\xab" * 100


def body_of(index: int) -> bytes:
    return f"{index:08d}|".encode().ljust(1024, b"x")


def fill(store, segments: int) -> list[int]:
    """Put 1 KiB messages until the log has ``segments`` segments, the last about half full;
    return each message's commit-log offset (its index is its position in the list)."""
    offsets: list[int] = []
    size = GEOMETRY["mapped_file_size_commit_log"]
    while store.max_physic_offset < (segments - 1) * size + size // 2:
        index = len(offsets)
        msg = MessageExt(topic=TOPIC, body=body_of(index), queue_id=index % QUEUES)
        msg.keys = [f"k{index}"]
        result = store.put_message(msg)
        assert result.ok, result.status
        offsets.append(result.append.wrote_offset)
    store.wait_for_dispatch()
    return offsets


def stopped_store(store_dir: Path, segments: int) -> tuple[Path, list[int], int]:
    """A store of ``segments`` segments of messages (``fill``), stopped cleanly: its directory,
    its messages' offsets and the log's end."""
    from broker.store.message_store import MessageStore
    from tests.store.conftest import small_config

    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    offsets = fill(store, segments)
    end = store.max_physic_offset
    store.shutdown()
    return store_dir, offsets, end


def overwrite(store_dir: Path, offset: int, data: bytes = DAMAGE) -> None:
    """Overwrite bytes at commit-log ``offset`` in the segment file, as a bad disk block would."""
    size = GEOMETRY["mapped_file_size_commit_log"]
    segment = store_dir / "commitlog" / f"{offset - offset % size:020d}"
    with open(segment, "r+b") as file:
        file.seek(offset % size)
        file.write(data)


def hit_by(offsets: list[int], end: int, start: int, length: int = len(DAMAGE)) -> set[int]:
    """Indexes of the messages whose stored bytes overlap ``[start, start + length)``."""
    bounds = [*offsets, end]
    return {i for i in range(len(offsets)) if bounds[i] < start + length and start < bounds[i + 1]}


def consume_all(store) -> tuple[dict[int, MessageExt], list[int]]:
    """Every message a consumer gets from each queue, start to end; returns the intact ones by
    index and the queue offsets of anything delivered with damaged bytes."""
    intact: dict[int, MessageExt] = {}
    damaged: list[int] = []
    for queue_id in range(QUEUES):
        offset, end = 0, store.get_max_offset_in_queue(TOPIC, queue_id)
        while offset < end:
            result = store.get_message("g", TOPIC, queue_id, offset, 32)
            for raw, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
                try:
                    msg = decode_message(raw, check_crc=True)
                    index = int(msg.body[:8])
                except (MessageDecodeError, ValueError):
                    damaged.append(queue_offset)
                    continue
                if msg.body != body_of(index) or msg.topic != TOPIC:
                    damaged.append(queue_offset)
                else:
                    intact[index] = msg
            assert result.next_begin_offset > offset or result.status is GetMessageStatus.FOUND, result
            offset = max(result.next_begin_offset, offset + len(result.messages))
    return intact, damaged


def copy_image(image: tuple[Path, list[int], int], tmp_path: Path) -> tuple[Path, list[int], int]:
    """A test's own copy of a module's ``stopped_store`` image (its store, offsets and end), to damage."""
    store_dir, offsets, end = image
    shutil.copytree(store_dir, tmp_path / "store")
    return tmp_path / "store", offsets, end
