"""Issue 31 §1: damage in flushed commit-log data is quarantined, never a reason to throw away the
intact records after it (1 MiB segments, 1 KiB messages, 100 bytes overwritten).

Before the fix (figures from the unfixed tree, this geometry): clean stop + damage mid third-last
segment lost 1,823 messages and deleted 2 segments; crash + damage in the previous segment lost
1,338 (and the active segment); damage mid active segment after a crash lost 444; damage in the
second of seven segments delivered 1 damaged message silently.
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

from broker.store.message_store import MessageStore
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, TOPIC, consume_all, fill, hit_by, overwrite

SEGMENTS = 7
SEGMENT = GEOMETRY["mapped_file_size_commit_log"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def clean_image(tmp_path_factory):
    """A store of seven segments stopped cleanly, and its messages' offsets."""
    store_dir = tmp_path_factory.mktemp("clean") / "store"
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    offsets = fill(store, SEGMENTS)
    end = store.max_physic_offset
    store.shutdown()
    return store_dir, offsets, end


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


def _check_survivors(store, store_dir: Path, offsets: list[int], end: int, damaged_at: int, before: list[str]):
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


def _run_case(image, tmp_path: Path, damage_at) -> None:
    store_dir, offsets, end = _copy(image, tmp_path)
    before = _segments(store_dir)
    at = damage_at(end)
    overwrite(store_dir, at)
    store = _reopen(store_dir)
    try:
        _check_survivors(store, store_dir, offsets, end, at, before)
    finally:
        store.shutdown()


def test_clean_stop_damage_mid_third_last_segment(clean_image, tmp_path):
    _run_case(clean_image, tmp_path, lambda end: (end // SEGMENT - 2) * SEGMENT + SEGMENT // 2)


def test_crash_damage_mid_previous_segment(crash_image, tmp_path):
    _run_case(crash_image, tmp_path, lambda end: (end // SEGMENT - 1) * SEGMENT + SEGMENT // 2)


def test_crash_damage_mid_active_segment(crash_image, tmp_path):
    _run_case(crash_image, tmp_path, lambda end: end // SEGMENT * SEGMENT + (end % SEGMENT) // 2)


def test_damage_in_an_old_segment_is_never_delivered(clean_image, tmp_path):
    _run_case(clean_image, tmp_path, lambda end: SEGMENT + SEGMENT // 2)
