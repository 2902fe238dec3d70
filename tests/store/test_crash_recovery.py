"""Acceptance 2: SIGKILL a SYNC_FLUSH writer mid-stream; every acknowledged message survives."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store.checkpoint import StoreCheckpoint
from broker.store.results import GetMessageStatus

WRITER = Path(__file__).with_name("crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]


def _acked(line: str) -> tuple[int, int, int, int]:
    """A line of the writer: message index, commit-log offset, queue id, queue offset."""
    index, wrote, queue_id, queue_offset = (int(x) for x in line.split())
    return index, wrote, queue_id, queue_offset


def _run_and_kill(store_dir: Path, start: int, at_least: int) -> list[tuple[int, int, int, int]]:
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(store_dir), str(start)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    acked: list[tuple[int, int, int, int]] = []
    assert proc.stdout is not None  # piped
    deadline = time.monotonic() + 60
    try:
        while len(acked) < at_least and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line and not line.startswith("FAIL"), f"writer stopped: {line!r}"
            acked.append(_acked(line))
    finally:
        proc.send_signal(signal.SIGKILL)
        rest = proc.communicate(timeout=30)[0]
    # Lines completed before the kill were acknowledged too.
    acked += [_acked(line) for line in rest.splitlines() if line.count(" ") == 3]
    assert len(acked) >= at_least
    return acked


def _all_messages(store) -> dict[int, MessageExt]:
    found = {}
    for queue_id in range(3):
        offset = 0
        while True:
            result = store.get_message("g", "crash", queue_id, offset, 32)
            if result.status is not GetMessageStatus.FOUND:
                break
            for raw in result.messages:
                msg = decode_message(raw, check_crc=True)
                assert msg.queue_offset == offset
                index = int(msg.body.split(b"|")[0].split(b"-")[1])
                assert msg.body == (f"message-{index}|" * (1 + index % 40)).encode()
                found[index] = msg
                offset += 1
    return found


def test_sigkill_keeps_every_acknowledged_message(open_store, tmp_path):
    store_dir = tmp_path / "store"
    acked = _run_and_kill(store_dir, 0, at_least=1500)
    assert (store_dir / "abort").exists()  # it really died without a clean shutdown

    # Same geometry as the writer's store.
    geometry = {"mapped_file_size_commit_log": 128 * 1024, "mapped_file_size_consume_queue": 100 * 20}
    store = open_store(store_dir, max_hash_slot_num=1024, max_index_num=10_000, **geometry)
    assert not store.last_exit_ok
    found = _all_messages(store)
    for index, wrote_offset, _queue_id, _logic in acked:
        assert index in found, f"acknowledged message {index} lost"
        assert found[index].commitlog_offset == wrote_offset
    assert sorted(found) == list(range(len(found)))  # nothing half-written or out of order
    assert store.query_message("crash", f"k{acked[-1][0]}", 5, 0, int(time.time() * 1000) + 1000)

    # Writing continues at the right commit-log and queue offsets.
    next_offsets = {q: store.get_max_offset_in_queue("crash", q) for q in range(3)}
    end = store.max_physic_offset
    result = store.put_message(MessageExt(topic="crash", body=b"after", queue_id=1))
    assert result.ok
    assert result.append.logics_offset == next_offsets[1]
    assert result.append.wrote_offset >= end
    store.wait_for_dispatch()
    assert decode_message(store.get_message("g", "crash", 1, next_offsets[1], 1).messages[0]).body == b"after"


def _write(store, count, topic="t"):
    results = [
        store.put_message(MessageExt(topic=topic, body=b"%d" % i * 30, queue_id=0)) for i in range(count)
    ]
    assert all(r.ok for r in results)
    store.wait_for_dispatch()
    return results


def _rewind_checkpoint(store_dir: Path, flushed_offset: int) -> None:
    """As if the process died before the checkpoint caught up with the log's flushed end: what
    lies past ``flushed_offset`` is an unflushed tail, cut where it is torn."""
    checkpoint = StoreCheckpoint(store_dir / "checkpoint")
    checkpoint.physic_flushed_offset = flushed_offset
    checkpoint.flush()


def test_garbled_tail_is_cut_and_writing_resumes(open_store, tmp_path):
    store = open_store(tmp_path / "s1")
    results = _write(store, 200)
    last = results[-1].append
    store.shutdown()
    _rewind_checkpoint(tmp_path / "s1", results[-5].append.wrote_offset)
    segment = store.commitlog.files.files[-1].path
    # Garble the last record's body and leave the abort file: recovery must verify the CRC.
    data = bytearray(segment.read_bytes())
    position = last.wrote_offset - int(segment.name) + last.wrote_bytes - 20
    data[position] ^= 0xFF
    segment.write_bytes(bytes(data))
    (tmp_path / "s1" / "abort").touch()

    reopened = open_store(tmp_path / "s1")
    assert reopened.max_physic_offset == last.wrote_offset
    assert reopened.get_max_offset_in_queue("t", 0) == 199
    assert reopened.look_message_by_offset(results[-2].append.wrote_offset).body == b"198" * 30
    again = reopened.put_message(MessageExt(topic="t", body=b"new", queue_id=0))
    assert again.append.logics_offset == 199 and again.append.wrote_offset == last.wrote_offset


def test_truncated_file_tail_is_recovered(open_store, tmp_path):
    store = open_store(tmp_path / "s2")
    results = _write(store, 120)
    store.shutdown()
    _rewind_checkpoint(tmp_path / "s2", results[-5].append.wrote_offset)
    segment = store.commitlog.files.files[-1].path
    cut_at = results[-1].append.wrote_offset - int(segment.name) + 10  # mid-record
    data = bytearray(segment.read_bytes())
    data[cut_at:] = bytes(len(data) - cut_at)  # the torn write never reached the disk
    segment.write_bytes(bytes(data))
    (tmp_path / "s2" / "abort").touch()

    reopened = open_store(tmp_path / "s2")
    assert reopened.get_max_offset_in_queue("t", 0) == 119
    assert reopened.max_physic_offset == results[-1].append.wrote_offset


def _store_with_two_queue_segments(open_store, store_dir: Path):
    geometry = {"mapped_file_size_consume_queue": 10 * 20}  # 10 entries per segment
    store = open_store(store_dir, **geometry)
    for i in range(15):
        assert store.put_message(MessageExt(topic="torn", body=b"m%d" % i, queue_id=0)).ok
    store.wait_for_dispatch()
    store.shutdown()
    return geometry, store_dir / "consumequeue" / "torn" / "0"


def test_a_segment_whose_creation_was_killed_is_extended_not_fatal(open_store, tmp_path):
    geometry, queue_dir = _store_with_two_queue_segments(open_store, tmp_path / "store")
    # As if killed between creating the next segment's file and sizing it.
    (queue_dir / f"{400:020d}").touch()  # segments are named by byte offset: 0, 200, 400
    (tmp_path / "store" / "abort").touch()
    store = open_store(tmp_path / "store", **geometry)
    assert store.get_max_offset_in_queue("torn", 0) == 15
    assert store.put_message(MessageExt(topic="torn", body=b"after", queue_id=0)).ok
    store.wait_for_dispatch()
    assert store.get_message("g", "torn", 0, 15, 5).message_count == 1


def test_a_short_segment_before_the_last_is_refused(open_store, tmp_path):
    geometry, queue_dir = _store_with_two_queue_segments(open_store, tmp_path / "store")
    first = queue_dir / f"{0:020d}"
    first.write_bytes(first.read_bytes()[:100])
    try:
        open_store(tmp_path / "store", **geometry)
    except ValueError as exc:
        assert "segments here are 200" in str(exc)
    else:
        raise AssertionError("a truncated middle segment must stop the store from starting")
