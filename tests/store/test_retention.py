"""Acceptance 3: retention with a fake clock — expired segments archived, then deleted."""

import hashlib
import os
from datetime import datetime

import pytest

from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.local_cluster import wait_until
from broker.store.archive import SegmentArchiver
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus
from broker.store.retention import RetentionPolicy, SegmentInfo

from .conftest import small_config

HOUR_MS = 3_600_000


def _at_hour(hour: int) -> float:
    return datetime(2026, 11, 20, hour, 30).timestamp()


def test_expired_segments_are_archived_then_deleted_and_live_data_stays(tmp_path):
    clock = {"now": _at_hour(3)}
    archive = tmp_path / "archive"
    config = small_config(
        mapped_file_size_commit_log=64 * 1024,
        file_reserved_time=72,
        delete_when="04",
        archive_uri=str(archive),
    )
    store = MessageStore(tmp_path / "store", config, clock=lambda: clock["now"])
    store.start()
    try:
        results = [
            store.put_message(MessageExt(topic="r", body=b"%05d" % i * 100, queue_id=0)) for i in range(600)
        ]
        assert all(r.ok for r in results)
        store.wait_for_dispatch()
        segments = list(store.commitlog.files.files)
        assert len(segments) >= 6
        old, recent = segments[:3], segments[3:]
        # The first three segments were last written four days ago, the rest just now.
        four_days_ago = clock["now"] - 96 * 3600
        for mapped in old:
            os.utime(mapped.path, (four_days_ago, four_days_ago))
        digests = {m.path.name: hashlib.sha256(m.path.read_bytes()).hexdigest() for m in old}
        sealed = sorted(m.path.name for m in segments[:-1])
        # Sealed segments are archived as the log rolls past them; with those copies lost,
        # retention's archive-before-delete must copy the expired ones again before deleting.
        assert wait_until(lambda: SegmentArchiver(str(archive)).list_archived() == sealed, timeout=20)
        for name in digests:
            (archive / "commitlog" / name).unlink()

        assert store.clean_service.run_once() == []  # 03:30 is not the delete hour
        clock["now"] = _at_hour(4)
        removed = store.clean_service.run_once()
        assert removed == [m.path.name for m in old]
        assert all(not m.path.exists() for m in old) and all(m.path.exists() for m in recent)
        for name, digest in digests.items():
            assert hashlib.sha256((archive / "commitlog" / name).read_bytes()).hexdigest() == digest
        assert SegmentArchiver(str(archive)).list_archived() == sealed

        min_offset = store.get_min_offset_in_queue("r", 0)
        assert min_offset > 0 and store.min_physic_offset == recent[0].file_from_offset
        assert store.get_message("g", "r", 0, 0, 1).status is GetMessageStatus.OFFSET_TOO_SMALL
        live = store.get_message("g", "r", 0, min_offset, 32)
        assert live.status is GetMessageStatus.FOUND
        assert decode_message(live.messages[0]).body == b"%05d" % min_offset * 100
        last = results[-1].append
        assert last is not None
        last_message = store.look_message_by_offset(last.wrote_offset)
        assert last_message is not None and last_message.body == b"00599" * 100
        assert store.clean_service.run_once() == []  # nothing else has expired
    finally:
        store.shutdown()


def _segments(ages_hours, now_ms):
    return [
        SegmentInfo(f"/s/{i}", i * 100, 100, now_ms - int(age * HOUR_MS), i == len(ages_hours) - 1)
        for i, age in enumerate(ages_hours)
    ]


def test_policy_only_at_delete_time_unless_disk_is_full():
    now = int(_at_hour(10) * 1000)
    policy = RetentionPolicy(72, "04;05", 75)
    segments = _segments([100, 90, 1, 0], now)
    assert policy.select_expired(segments, now, disk_used_ratio=50) == []
    at_four = int(_at_hour(4) * 1000)
    assert [
        s.start_offset for s in policy.select_expired(_segments([100, 90, 1, 0], at_four), at_four, 50)
    ] == [
        0,
        100,
    ]
    # Disk over the ratio: oldest go regardless of age, never the current one.
    forced = policy.select_expired(segments, now, disk_used_ratio=90)
    assert [s.start_offset for s in forced] == [0, 100, 200]


def test_policy_never_leaves_a_hole_and_caps_each_pass():
    at_four = int(_at_hour(4) * 1000)
    policy = RetentionPolicy(72, "04", 75, max_per_run=2)
    # The second segment is young (touched again): nothing behind it may go first.
    assert [
        s.start_offset for s in policy.select_expired(_segments([100, 1, 100, 0], at_four), at_four, 10)
    ] == [0]
    capped = policy.select_expired(_segments([100, 100, 100, 100, 0], at_four), at_four, 10)
    assert [s.start_offset for s in capped] == [0, 100]


@pytest.mark.parametrize("delete_when", ["25", "04;x", "04;-1", ""])
def test_policy_rejects_bad_hours(delete_when):
    # The same reading as the broker's config check of deleteWhen (broker_config_keys.Hours).
    with pytest.raises(ValueError, match=f"deleteWhen={delete_when!r}: must be hours 0-23"):
        RetentionPolicy(72, delete_when, 75)


def test_archiver_is_idempotent_and_verifies(tmp_path):
    segment = tmp_path / "00000000000000065536"
    segment.write_bytes(os.urandom(4096))
    archiver = SegmentArchiver(f"file://{tmp_path / 'arch'}")
    first = archiver.archive(segment)
    assert archiver.archive(segment) == first
    manifest = (tmp_path / "arch" / "manifest.jsonl").read_text().splitlines()
    assert len(manifest) == 1 and '"start_offset":65536' in manifest[0]
    with pytest.raises(ValueError, match="only a local directory"):
        SegmentArchiver("s3a://bucket/path")


def test_checkpoint_round_trip(tmp_path):
    # The checkpoint records flush progress and survives a restart.
    from broker.store.checkpoint import StoreCheckpoint

    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp, checkpoint.index_msg_timestamp = (
        9000,
        8000,
        7000,
    )
    checkpoint.flush()
    again = StoreCheckpoint(tmp_path / "checkpoint")
    assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp) == (
        9000,
        8000,
        7000,
    )
    assert again.min_timestamp() == 5000 and again.min_timestamp(index_safe=True) == 4000
