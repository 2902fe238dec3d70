"""Issue 31 §1, second attack on damaged commit-log data: a purge killed half-way, a checkpoint at
the very end of the log, damaged consume-queue entries (1 MiB segments, 1 KiB messages).

Figures before / after each fix are in each test's docstring."""

from __future__ import annotations

import logging
import shutil
import struct
from pathlib import Path

import pytest

from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store.message_store import MessageStore
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, consume_all, copy_image, hit_by, overwrite, stopped_store

SEGMENT = GEOMETRY["mapped_file_size_commit_log"]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    return stopped_store(tmp_path_factory.mktemp("round2") / "store", 3)


def _open(store_dir: Path) -> MessageStore:
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    store.wait_for_dispatch()
    return store


def test_a_purge_killed_half_way_leaves_its_filled_ranges_purged(image, tmp_path):
    """Break 3: three ranges found, the first overwritten with its filler, then the process dies
    before the purge is recorded. Before: the filled range was dropped at load, a read of its
    queue entry reported the filler as a damaged range (0-1130 in the attack) and every later
    purge-all was refused. After: it is kept as purged, reads pass over it, purge-all closes the
    other two, nothing open."""
    store_dir, offsets, end = copy_image(image, tmp_path)
    victims = [offsets[100] + 10, offsets[900] + 10, offsets[1500] + 10]
    for at in victims:
        overwrite(store_dir, at)
    (store_dir / "abort").touch()
    shutil.rmtree(store_dir / "consumequeue")
    store = _open(store_dir)
    ranges = store.quarantine.open_ranges()
    assert len(ranges) == 3
    store.quarantine._overwrite(ranges[0])  # what the killed purge got done
    store.shutdown()
    store = _open(store_dir)
    try:
        assert len(store.quarantine.open_ranges()) == 2
        assert store.quarantine.covering(ranges[0].from_offset) is not None
        intact, damaged = consume_all(store)
        lost = set(range(len(offsets))) - set(intact)
        assert damaged == [] and lost == set().union(*(hit_by(offsets, end, at) for at in victims))
        assert len(store.quarantine.open_ranges()) == 2  # the filler read is no new damage
        assert len(store.quarantine.purge()) == 2
        assert store.quarantine.open_ranges() == []
    finally:
        store.shutdown()


def test_a_flushed_position_at_the_end_of_the_last_file_is_garbled(image, tmp_path):
    """Break 4: checkpoint flushed position = end of the last segment file, a crash, the last
    record torn. Before: the torn record and the zero rest of the active segment were one damaged
    range and the log's end jumped to the segment's end. After: the torn record is cut, no range."""
    store_dir, offsets, end = copy_image(image, tmp_path)
    path = store_dir / "checkpoint"
    raw = bytearray(path.read_bytes())
    raw[24:32] = struct.pack(">q", (end // SEGMENT + 1) * SEGMENT)
    path.write_bytes(bytes(raw))
    (store_dir / "abort").touch()
    overwrite(store_dir, offsets[-1] + 500, bytes(600))
    store = _open(store_dir)
    try:
        assert store.max_physic_offset == offsets[-1]
        assert store.quarantine.open_ranges() == []
    finally:
        store.shutdown()


@pytest.fixture(scope="module")
def two_topics(tmp_path_factory):
    """Topics A and SECRET interleaved in one log, stopped cleanly; the records' offsets."""
    store_dir = tmp_path_factory.mktemp("cq") / "store"
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    offsets = []
    for i in range(200):
        msg = MessageExt(topic="A" if i % 2 == 0 else "SECRET", body=f"{i:08d}".encode() * 8, queue_id=0)
        appended = store.put_message(msg).append
        assert appended is not None
        offsets.append(appended.wrote_offset)
    store.wait_for_dispatch()
    store.shutdown()
    return store_dir, offsets


@pytest.mark.parametrize(
    "entry",
    ["other_topic", "zeros", "wrong_size", "garbage", "blank"],
)
def test_a_damaged_consume_queue_entry_is_neither_delivered_nor_blamed_on_the_log(
    two_topics, tmp_path, caplog, entry
):
    """Break 6: A's entry 10 rewritten. Before: pointing at SECRET's record, SECRET's message was
    delivered to A's consumer as intact; zeros or a wrong size quarantined an intact record (A
    then lost it). After: no SECRET message, no range, an ERROR naming the queue's entry; a wrong
    size still serves A's own message (its header is sound and it is A's); a blank entry (a queue
    offset whose record was damaged) is passed over without an ERROR."""
    shutil.copytree(two_topics[0], tmp_path / "store")
    store_dir, offsets = tmp_path / "store", two_topics[1]
    stored = {
        "other_topic": struct.pack(">qiq", offsets[41], offsets[42] - offsets[41], 0),
        "zeros": bytes(20),
        "wrong_size": struct.pack(">qiq", offsets[20], 1130, 0),
        "garbage": b"\xab" * 20,
        "blank": struct.pack(">qiq", 0, 0x7FFFFFFF, 0),  # fillPreBlank's entry: no damage at all
    }
    cq = sorted((store_dir / "consumequeue" / "A" / "0").iterdir())[0]
    with open(cq, "r+b") as file:
        file.seek(10 * 20)
        file.write(stored[entry])
    store = _open(store_dir)
    try:
        with caplog.at_level(logging.ERROR):
            result = store.get_message("g", "A", 0, 0, 32)
        got = {
            qo: decode_message(raw, check_crc=True)
            for raw, qo in zip(result.messages, result.queue_offsets, strict=True)
        }
        assert {m.topic for m in got.values()} == {"A"}
        assert store.quarantine.open_ranges() == []
        assert set(got) == set(range(32)) - ({10} if entry != "wrong_size" else set())
        assert all(int(m.body[:8]) == 2 * qo for qo, m in got.items())
        blamed = any("consume queue A/0: entry 10" in r.getMessage() for r in caplog.records)
        assert blamed == (entry in ("other_topic", "zeros", "garbage"))
    finally:
        store.shutdown()
