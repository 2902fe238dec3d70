"""Issue 31 §1: damage in flushed commit-log data is quarantined, never a reason to throw away the
intact records after it (1 MiB segments, 1 KiB messages, 100 bytes overwritten).

Before the fix (figures from the unfixed tree, this geometry, 6,014 messages in seven segments):
clean stop + damage mid third-last segment lost 1,851 messages and deleted 2 segments; crash +
damage mid previous segment lost 926 and deleted 1; crash + damage mid active segment lost 232;
damage mid second segment (never re-read) delivered 1 damaged message, nothing logged. After: 1
lost in each (the message the bytes hit), 0 damaged delivered, 7 segments kept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.common.message_codec import decode_message
from broker.common.sysflag import visible_to_consumers
from broker.store.message_store import MessageStore
from broker.store.quarantine import PURGED_TOPIC
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, TOPIC, consume_all, hit_by, overwrite, stopped_store

SEGMENTS = 7
SEGMENT = GEOMETRY["mapped_file_size_commit_log"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def clean_image(tmp_path_factory):
    """A store of seven segments stopped cleanly, and its messages' offsets."""
    return stopped_store(tmp_path_factory.mktemp("clean") / "store", SEGMENTS)


@pytest.fixture(scope="module")
def crash_image(tmp_path_factory):
    """The same store left by a SIGKILL (abort file present) once its checkpoint covered the log."""
    work = tmp_path_factory.mktemp("crash")
    store_dir, offsets_file = work / "store", work / "offsets.json"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/store/damage_writer.py"), str(store_dir), str(offsets_file),
         str(SEGMENTS)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (store_dir / "abort").exists()
    offsets = json.loads(offsets_file.read_text())
    size = GEOMETRY["mapped_file_size_commit_log"]
    end = offsets[-1] + (offsets[-1] - offsets[-2])  # all messages have one size
    assert end // size == SEGMENTS - 1
    return store_dir, offsets, end


def _copy(image, tmp_path: Path) -> tuple[Path, list[int], int]:
    store_dir, offsets, end = image
    copy = tmp_path / "store"
    shutil.copytree(store_dir, copy)
    return copy, offsets, end


def _segments(store_dir: Path) -> list[str]:
    return sorted(p.name for p in (store_dir / "commitlog").iterdir())


def _check_survivors(
    store, store_dir: Path, offsets: list[int], end: int, damaged_at: int, before: list[str]
):
    """The acceptance: only the overwritten messages are lost, none damaged is delivered, no
    segment is gone, queues and index point at the survivors, the damage is reported."""
    intact, delivered_damaged = consume_all(store)
    lost = set(range(len(offsets))) - set(intact)
    print(f"lost {len(lost)} of {len(offsets)}, delivered damaged {len(delivered_damaged)}, "
          f"segments {len(before)} -> {len(_segments(store_dir))}")  # fmt: skip
    assert delivered_damaged == []
    assert lost <= hit_by(offsets, end, damaged_at) and len(lost) <= 2
    assert _segments(store_dir) == before
    for index, msg in intact.items():
        assert msg.commitlog_offset == offsets[index]
    now_ms = int(time.time() * 1000) + 60_000
    for index in (min(set(range(len(offsets))) - lost - set(range(min(lost, default=0)))), len(offsets) - 1):
        found = store.query_message(TOPIC, f"k{index}", 4, 0, now_ms)
        assert [m.commitlog_offset for m in found] == [offsets[index]]
    for index in lost:  # the index entry of a lost message leads to nothing, not to wrong bytes
        assert store.query_message(TOPIC, f"k{index}", 4, 0, now_ms) == []
    info = store.runtime_info()
    assert int(info["commitLogDamagedRanges"]) >= 1
    ranges = json.loads(info["commitLogDamagedDetail"])
    assert any(r["from"] <= damaged_at < r["to"] for r in ranges)
    return lost


def _reopen(store_dir: Path) -> MessageStore:
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    return store


def _run_case(image, tmp_path: Path, damage_at, clean_stop: bool = False) -> None:
    store_dir, offsets, end = _copy(image, tmp_path)
    before = _segments(store_dir)
    at = damage_at(end)
    overwrite(store_dir, at)
    store = _reopen(store_dir)
    try:
        if clean_stop:  # nothing was rescanned at the start: the damage is found by the reads
            assert store.runtime_info()["commitLogDamagedRanges"] == "0"
        _check_survivors(store, store_dir, offsets, end, at, before)
    finally:
        store.shutdown()


def test_clean_stop_damage_mid_third_last_segment(clean_image, tmp_path):
    _run_case(
        clean_image, tmp_path, lambda end: (end // SEGMENT - 2) * SEGMENT + SEGMENT // 2, clean_stop=True
    )


def test_crash_damage_mid_previous_segment(crash_image, tmp_path):
    _run_case(crash_image, tmp_path, lambda end: (end // SEGMENT - 1) * SEGMENT + SEGMENT // 2)


def test_crash_damage_mid_active_segment(crash_image, tmp_path):
    _run_case(crash_image, tmp_path, lambda end: end // SEGMENT * SEGMENT + (end % SEGMENT) // 2)


def test_damage_in_an_old_segment_is_never_delivered(clean_image, tmp_path):
    _run_case(clean_image, tmp_path, lambda end: SEGMENT + SEGMENT // 2, clean_stop=True)


def test_damage_across_two_records_loses_those_two_and_is_kept_across_restarts(clean_image, tmp_path):
    """The 100 bytes straddle a body's end and the next record's header: both are lost, the walk
    resynchronises on the record after them, and the quarantine survives a restart."""
    store_dir, offsets, end = _copy(clean_image, tmp_path)
    before = _segments(store_dir)
    victim = len(offsets) // 2
    at = offsets[victim + 1] - 60
    overwrite(store_dir, at)
    (store_dir / "abort").touch()  # a crash: re-dispatch walks the segment
    store = _reopen(store_dir)
    try:
        assert _check_survivors(store, store_dir, offsets, end, at, before) == {victim, victim + 1}
    finally:
        store.shutdown()
    store = _reopen(store_dir)
    try:
        ranges = json.loads(store.runtime_info()["commitLogDamagedDetail"])
        assert [(r["from"], r["to"]) for r in ranges] == [(offsets[victim], offsets[victim + 2])]
        assert store.runtime_info()["commitLogDamagedBytes"] == str(offsets[victim + 2] - offsets[victim])
    finally:
        store.shutdown()


def test_purge_leaves_a_range_every_walker_passes(clean_image, tmp_path):
    from broker.common.segment_scan import BLANK_END, segment_end, segment_records
    from broker.store import recovery

    store_dir, offsets, _end = _copy(clean_image, tmp_path)
    before = _segments(store_dir)
    overwrite(store_dir, offsets[100] + 500)  # inside a body: found by a read
    last_of_third = max(i for i, o in enumerate(offsets) if o < SEGMENT * 3)
    seal = offsets[last_of_third] + offsets[last_of_third] - offsets[last_of_third - 1]
    overwrite(store_dir, seal - 150, b"\xab" * 200)  # the third segment's last body end and its seal
    store = _reopen(store_dir)
    try:
        consume_all(store)
        assert store.runtime_info()["commitLogDamagedRanges"] == "2"
        assert store.purge_damaged_commit_log(offsets[100] + 1) == []  # no range starts there
        # A slave copying the segments now gets the ranges as the purge will write them.
        sent = [store.commit_log_data(base, SEGMENT) for base in (0, 2 * SEGMENT)]
        assert sent[0] != store.commitlog.read(0, SEGMENT)
        purged = store.purge_damaged_commit_log()
        assert [(r.from_offset, r.to_offset) for r in purged] == [
            (offsets[100], offsets[101]),
            (offsets[last_of_third], SEGMENT * 3),
        ]
        info = store.runtime_info()
        assert (info["commitLogDamagedRanges"], info["commitLogDamagedBytes"]) == ("0", "0")
        assert json.loads(info["commitLogDamagedDetail"]) == []
        assert [store.commit_log_data(base, SEGMENT) for base in (0, 2 * SEGMENT)] == sent
        for segment in store.commitlog.files.files[:-1]:  # what the Spark decoder and HA walk
            last = 0
            for pos, size in segment_records(segment.view, 0, segment.file_size):
                last = pos + size
            assert segment_end(segment.view, last, segment.file_size) == BLANK_END
        walked = []
        recovery.replay(store.commitlog, 0, lambda _v, _p, offset: walked.append(offset))
        # The first range is now one filler record (same size), the second the segment's seal.
        assert set(walked) == set(offsets) - {purged[1].from_offset}
        record = store.commitlog.read(offsets[100], offsets[101] - offsets[100])
        assert record is not None
        filler = decode_message(record, check_crc=True)
        assert (filler.topic, filler.commitlog_offset) == (PURGED_TOPIC.decode(), offsets[100])
        assert not visible_to_consumers(filler.sys_flag)
        intact, damaged = consume_all(store)
        assert damaged == [] and len(intact) == len(offsets) - 2
    finally:
        store.shutdown()
    assert _segments(store_dir) == before
    store = _reopen(store_dir)  # the closed entries stay closed
    try:
        assert store.runtime_info()["commitLogDamagedRanges"] == "0"
    finally:
        store.shutdown()


def test_consume_queues_rebuilt_across_damage_point_at_the_survivors(crash_image, tmp_path):
    """Consume queues lost in the crash: re-dispatch walks the whole log, quarantines the damaged
    records (their header and a body hit), puts blank entries at their queue offsets and
    dispatches everything after them (before: the walk stopped at the damage)."""
    store_dir, offsets, end = _copy(crash_image, tmp_path)
    before = _segments(store_dir)
    victim = len(offsets) // 3
    at = offsets[victim + 1] - 60
    overwrite(store_dir, at)
    shutil.rmtree(store_dir / "consumequeue")
    store = _reopen(store_dir)
    try:
        assert _check_survivors(store, store_dir, offsets, end, at, before) == {victim, victim + 1}
        queue = store.find_consume_queue(TOPIC, victim % 4)
        assert queue is not None and queue.max_offset == sum(
            1 for i in range(len(offsets)) if i % 4 == victim % 4
        )
    finally:
        store.shutdown()


def test_reads_in_any_order_make_ranges_that_never_overlap_or_start_inside_a_record(clean_image, tmp_path):
    store_dir, offsets, _end = _copy(clean_image, tmp_path)
    i = 500
    for index in (i, i + 1):  # two bodies hit, headers intact
        overwrite(store_dir, offsets[index] + 300, b"\xab" * 10)
    j = 900
    overwrite(store_dir, offsets[j], b"\xab" * 10)  # a header: where it began, a walk tells
    store = _reopen(store_dir)
    try:
        # An offset inside a sound record (a stray message id or queue entry) is no damage.
        assert store.select_one_message_by_offset(offsets[10] + 7) is None
        assert store.runtime_info()["commitLogDamagedRanges"] == "0"
        assert store.select_one_message_by_offset(offsets[i + 1]) is None  # the later one first
        assert store.select_one_message_by_offset(offsets[i]) is None
        info = store.runtime_info()
        ranges = [(r["from"], r["to"]) for r in json.loads(info["commitLogDamagedDetail"])]
        assert ranges == [(offsets[i], offsets[i + 1]), (offsets[i + 1], offsets[i + 2])]
        assert info["commitLogDamagedBytes"] == str(offsets[i + 2] - offsets[i])
        assert store.select_one_message_by_offset(offsets[i + 2]) is not None
        result = store.get_message("g", TOPIC, j % 4, j // 4, 1)
        assert result.messages == [] and result.next_begin_offset == j // 4 + 1
        detail = json.loads(store.runtime_info()["commitLogDamagedDetail"])
        assert (detail[-1]["from"], detail[-1]["to"], detail[-1]["reason"]) == (
            offsets[j],
            offsets[j + 1],
            "bad magic code",
        )
    finally:
        store.shutdown()


def test_a_slave_cutting_its_log_forgets_the_ranges_it_cut(clean_image, tmp_path):
    """A slave following its master cuts a divergent tail: ranges there name bytes that are gone,
    and the master's records will take their offsets (they must not be skipped then)."""
    store_dir, offsets, _end = _copy(clean_image, tmp_path)
    overwrite(store_dir, offsets[-50] + 300, b"\xab" * 10)
    overwrite(store_dir, offsets[-20] + 300, b"\xab" * 10)
    store = _reopen(store_dir)
    try:
        consume_all(store)
        assert store.runtime_info()["commitLogDamagedRanges"] == "2"
        assert store.replica_log().truncate(offsets[-30]) > 0
        detail = json.loads(store.runtime_info()["commitLogDamagedDetail"])
        assert [(r["from"], r["to"]) for r in detail] == [(offsets[-50], offsets[-49])]
        assert store.quarantine.covering(offsets[-20]) is None
    finally:
        store.shutdown()
