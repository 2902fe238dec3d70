"""Issue 31 §1, the attack on the quarantine (/tmp/reports/attack-store.md): damage past the
checkpointed flushed position, a bad checkpoint, a damaged seal, a short sealed segment and an
untrusted ``damagedCommitLog.json`` (1 MiB segments, 1 KiB messages, five segments).

Figures before the fix (unfixed tree, this geometry, 4,168 messages): damage past the flushed
position in the last segment cut 374 intact messages (100 bytes, and 2 KiB of zeros alike),
nothing reported; a flushed position of 1<<60 or past the log made the active segment's
unwritten tail (523,997 bytes) a damaged range and the log's end jumped to the segment's end; a
damaged seal left no range; a short sealed segment refused to start (ValueError); a range to
2**50, across segments, negative, reversed or over sound records in the JSON was accepted as is,
"from": "abc" crashed the start, garbage JSON was ignored without a word; an overlapping forged
range was purged: 500 intact messages destroyed. After: see each test.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path

import pytest

from broker.common.segment_scan import BLANK_END, segment_end, segment_records
from broker.store.message_store import MessageStore
from broker.store.quarantine import PurgeRefused
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, consume_all, copy_image, hit_by, overwrite, stopped_store

SEGMENT = GEOMETRY["mapped_file_size_commit_log"]
SEGMENTS = 5


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """A store of five segments stopped cleanly, its messages' offsets and its end."""
    return stopped_store(tmp_path_factory.mktemp("edges") / "store", SEGMENTS)


def _open(store_dir: Path) -> MessageStore:
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    return store


def _set_flushed(store_dir: Path, flushed: int, crash: bool = True) -> None:
    """What a crash leaves when the checkpoint lagged (or a garbled checkpoint): the flushed position."""
    path = store_dir / "checkpoint"
    raw = bytearray(path.read_bytes())
    raw[24:32] = struct.pack(">q", flushed)
    path.write_bytes(bytes(raw))
    if crash:
        (store_dir / "abort").touch()


def _lost(store, offsets: list[int]) -> set[int]:
    intact, damaged = consume_all(store)
    assert damaged == []
    return set(range(len(offsets))) - set(intact)


def _ranges(store) -> list[tuple[int, int]]:
    return [(r["from"], r["to"]) for r in json.loads(store.runtime_info()["commitLogDamagedDetail"])]


@pytest.mark.parametrize("damage", ["bytes", "zeros"])
def test_damage_past_the_flushed_position_followed_by_sound_records_is_quarantined(image, tmp_path, damage):
    """Break 1/2: the checkpoint lagged behind the last segment (SYNC_FLUSH acknowledged it all);
    100 bytes (or 2 KiB of zeros) hit a record there. Before: 374 lost, 0 ranges. After: the hit
    messages only (1, or 2 for the zeros), one range, the log's end unchanged."""
    store_dir, offsets, end = copy_image(image, tmp_path)
    last_base = end // SEGMENT * SEGMENT
    _set_flushed(store_dir, last_base)
    victim = next(i for i, o in enumerate(offsets) if o >= last_base + 100_000)
    if damage == "bytes":
        at, data = offsets[victim] + 300, b"\xab" * 100
    else:
        at, data = offsets[victim], bytes(2048)
    overwrite(store_dir, at, data)
    store = _open(store_dir)
    try:
        assert store.max_physic_offset == end
        lost = _lost(store, offsets)
        print(f"lost {len(lost)}, ranges {_ranges(store)}")
        assert lost <= hit_by(offsets, end, at, len(data)) and 1 <= len(lost) <= 3
        assert any(a <= at < b for a, b in _ranges(store))
    finally:
        store.shutdown()


def test_a_real_torn_tail_is_still_cut(image, tmp_path):
    """Garbage after the last record with nothing sound after it: the crash cut the last write."""
    store_dir, offsets, end = copy_image(image, tmp_path)
    _set_flushed(store_dir, end // SEGMENT * SEGMENT)
    overwrite(store_dir, offsets[-1] + 200, b"\xab" * 100)
    store = _open(store_dir)
    try:
        assert store.max_physic_offset == offsets[-1]
        assert _ranges(store) == []
        assert _lost(store, offsets) == {len(offsets) - 1}
    finally:
        store.shutdown()


@pytest.mark.parametrize("flushed", [1 << 60, 10 * SEGMENT + 12345])
@pytest.mark.parametrize("crash", [False, True])
def test_a_flushed_position_beyond_the_log_is_unknown_not_damage(image, tmp_path, caplog, flushed, crash):
    """Break 6: before, the unwritten tail of the active segment was 1 damaged range (523,997
    bytes) and the log's end jumped to the segment's end. After: no range, same end, a WARNING
    naming the checkpoint file."""
    store_dir, offsets, end = copy_image(image, tmp_path)
    _set_flushed(store_dir, flushed, crash)
    with caplog.at_level(logging.WARNING):
        store = _open(store_dir)
    try:
        assert (store.max_physic_offset, _ranges(store)) == (end, [])
        assert any("checkpoint" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
        assert _lost(store, offsets) == set()
    finally:
        store.shutdown()


def _seal_of(offsets: list[int], segment: int) -> int:
    last = max(i for i, o in enumerate(offsets) if o < SEGMENT * (segment + 1))
    return offsets[last] + offsets[last] - offsets[last - 1]


def test_a_damaged_seal_is_found_at_start_and_sent_to_a_slave_well_formed(image, tmp_path):
    """Break 3: the blank end record of a sealed segment overwritten. Before: no range, and the
    bytes a slave copies ended in garbage (its walk stopped there for ever). After: one range
    from the seal to the segment's end, and the copied segment ends with a blank record."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    seal = _seal_of(offsets, 0)
    overwrite(store_dir, seal, b"\xab" * 8)
    store = _open(store_dir)
    try:
        assert _ranges(store) == [(seal, SEGMENT)]
        sent = store.commit_log_data(0, SEGMENT)
        assert sent is not None
        last = max(p + s for p, s in segment_records(sent, 0))
        assert (last, segment_end(sent, last)) == (seal, BLANK_END)
        assert _lost(store, offsets) == set()
    finally:
        store.shutdown()


def test_a_seal_damaged_while_running_is_found_when_a_slave_is_sent_it(image, tmp_path):
    """Break 3, after start-up: the second segment's seal goes bad under a running master. Before:
    the segment's end went to a slave as garbage. After: found when the end is sent, quarantined,
    sent as a blank end record."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    store = _open(store_dir)
    try:
        seal = _seal_of(offsets, 1)
        overwrite(store_dir, seal, b"\xab" * 8)  # the running store's mapping sees it
        ranges = [store.commit_log_data(SEGMENT + at, 256 * 1024) for at in range(0, SEGMENT, 256 * 1024)]
        assert None not in ranges
        sent = b"".join(data for data in ranges if data is not None)
        last = max(p + s for p, s in segment_records(sent, 0))
        assert (SEGMENT + last, segment_end(sent, last)) == (seal, BLANK_END)
        assert _ranges(store) == [(seal, 2 * SEGMENT)]
    finally:
        store.shutdown()


def test_a_short_sealed_segment_is_damage_not_a_refusal_to_start(image, tmp_path, caplog):
    """Break 7: the second segment cut to half. Before: ValueError, the broker did not start.
    After: the file is given back its size (zeros), the missing half is one range, nothing after
    it is lost."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    path = store_dir / "commitlog" / f"{SEGMENT:020d}"
    os.truncate(path, SEGMENT // 2)
    with caplog.at_level(logging.ERROR):
        store = _open(store_dir)
    try:
        assert path.stat().st_size == SEGMENT
        assert any(path.name in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
        lost = _lost(store, offsets)
        assert lost == {i for i, o in enumerate(offsets) if SEGMENT + SEGMENT // 2 - 1100 < o < 2 * SEGMENT}
        [(start, stop)] = _ranges(store)
        assert stop == 2 * SEGMENT and start in offsets
    finally:
        store.shutdown()


def _write_ranges(store_dir: Path, ranges) -> Path:
    path = store_dir / "config" / "damagedCommitLog.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(ranges if isinstance(ranges, str) else json.dumps({"ranges": ranges}))
    return path


def _entry(start, stop) -> dict:
    return {"from": start, "to": stop, "segment": "x", "reason": "x", "foundAt": 1}


@pytest.mark.parametrize(
    "entries",
    [
        [_entry(1000, 1 << 50)],  # past the log's end
        [_entry(0, 4 * SEGMENT)],  # across segments
        [_entry(-5000, 2000)],
        [_entry("abc", 2000)],
        [_entry(2000, 1000)],
        [_entry(0, 600_000)],  # a sound record starts at its first byte
        [_entry(500, 600_000)],  # sound records start inside
        '{"ranges": [',  # garbage
    ],
)
def test_untrusted_ranges_are_dropped_with_an_error(image, tmp_path, caplog, entries):
    """Break 4 and the JSON notes. Before: each range was kept as written (in the attack one to
    2**50 hid 511 of 512 messages and every later send), "abc" crashed the start, garbage JSON
    was ignored silently. After: each dropped with an ERROR naming the file, nothing hidden."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    path = _write_ranges(store_dir, entries)
    with caplog.at_level(logging.ERROR):
        store = _open(store_dir)
    try:
        assert _ranges(store) == []
        assert any(str(path) in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
        assert _lost(store, offsets) == set()
        assert store.purge_damaged_commit_log() == []
    finally:
        store.shutdown()


def test_overlapping_ranges_keep_the_first_only_and_purge_destroys_no_intact_record(image, tmp_path):
    """Break 5: [a, b) of real damage and an overlapping forged one. Before: the purge overwrote
    500 intact messages. After: the forged one is dropped at load; the purge overwrites the
    damaged record only."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    overwrite(store_dir, offsets[100] + 300, b"\xab" * 10)
    forged = [_entry(offsets[100], offsets[101]), _entry(offsets[100] + 500, offsets[600])]
    _write_ranges(store_dir, forged)
    store = _open(store_dir)
    try:
        assert _ranges(store) == [(offsets[100], offsets[101])]
        assert [(r.from_offset, r.to_offset) for r in store.purge_damaged_commit_log()] == [
            (offsets[100], offsets[101])
        ]
        assert _lost(store, offsets) == {100}
    finally:
        store.shutdown()


def test_purge_re_verifies_the_bytes_and_refuses_touching_nothing(image, tmp_path):
    """Break 5: the bytes changed since the range was recorded (restored from a backup): a sound
    record starts in it now. The purge refuses with a remark and writes nothing."""
    store_dir, offsets, _end = copy_image(image, tmp_path)
    segment = store_dir / "commitlog" / f"{0:020d}"
    original = segment.read_bytes()[offsets[100] : offsets[101]]
    overwrite(store_dir, offsets[100] + 300, b"\xab" * 10)
    store = _open(store_dir)
    try:
        _lost(store, offsets)
        assert _ranges(store) == [(offsets[100], offsets[101])]
        store.commitlog.files.files[0].rewrite(offsets[100], original)
        before = store.commitlog.read(0, SEGMENT)
        with pytest.raises(PurgeRefused, match="sound record"):
            store.purge_damaged_commit_log()
        assert store.commitlog.read(0, SEGMENT) == before
        assert _ranges(store) == [(offsets[100], offsets[101])]
    finally:
        store.shutdown()
