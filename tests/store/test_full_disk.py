"""A full disk, met by the store on a real small filesystem (a few-MiB tmpfs, see tests/small_disk).

Issue 21: a fast producer filled the store's disk and the broker died of SIGBUS (a write into a
mapped page the filesystem could not back); restarting on the still-full disk died again. Here
the store refuses writes with RocketMQ's statuses and remarks instead, keeps serving reads,
takes writes again by itself once space returns, starts on a full disk — and every acknowledged
message is there exactly once, in order, at the end.
"""

from __future__ import annotations

import errno
import os
import shutil
import time

import pytest

from broker.common.broker_config_keys import KEYS, ConfigValueError
from broker.common.json_config_file import JsonConfigFile
from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store import mapped_file
from broker.store.consume_queue import ConsumeQueue
from broker.store.mapped_file import MappedFileQueue, SegmentAllocationError
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus, PutMessageStatus
from broker.store.retention import RetentionPolicy, SegmentInfo
from broker.store.running_flags import DISK_FULL, WRITE_INDEX_FILE_ERROR, WRITE_LOGICS_QUEUE_ERROR
from tests.small_disk import fill, free_bytes, small_disk
from tests.store.conftest import small_config

DISK_BYTES = 1024 * 1024
SEGMENT = 128 * 1024
CQ_ENTRIES = 32  # a consume-queue file of 32 entries (640 bytes)
BODY = b"x" * 1000
TOPIC = "FullDiskTopic"
REFUSED = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [CL: "
)


@pytest.fixture
def disk(tmp_path):
    with small_disk(tmp_path / "disk", DISK_BYTES) as mounted:
        yield mounted


@pytest.fixture
def stores():
    """Stores to shut down after the test (before the disk under them is unmounted)."""
    opened: list[MessageStore] = []
    yield opened
    for store in opened:
        store.shutdown()


def start_store(stores, directory, quiet=True, **overrides) -> MessageStore:
    values = {
        "mapped_file_size_commit_log": SEGMENT,
        "mapped_file_size_consume_queue": CQ_ENTRIES * 20,
        "max_hash_slot_num": 64,
        "max_index_num": 128,
    }
    store = MessageStore(directory, small_config(**(values | overrides)))
    store.start()
    stores.append(store)
    if quiet:  # the test checks the disk itself, when it chooses
        store.clean_service.shutdown()
    return store


def message(index: int, key: str | None = None) -> MessageExt:
    properties = {"KEYS": key} if key else {}
    return MessageExt(topic=TOPIC, body=BODY + str(index).encode(), queue_id=0, properties=properties)


def put_until_refused(store: MessageStore, start: int = 0, limit: int = 5000, keyed: bool = False):
    """Put messages until one is refused: (queue offsets of the acked ones, the refusal)."""
    acked: list[int] = []
    for index in range(start, start + limit):
        result = store.put_message(message(index, f"k{index}" if keyed else None))
        if not result.ok:
            return acked, result
        assert result.append is not None
        acked.append(result.append.logics_offset)
    raise AssertionError(f"{limit} messages fitted on a {DISK_BYTES}-byte disk")


def bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    """Every body readable from the queue, in queue order. Entries whose commit-log segment was
    just deleted (the queue's minimum not corrected yet) are passed over, as a consumer passes
    over MESSAGE_WAS_REMOVING."""
    assert store.wait_for_dispatch(timeout=10)
    found: list[bytes] = []
    offset = store.get_min_offset_in_queue(TOPIC, queue_id)
    while True:
        result = store.get_message("g", TOPIC, queue_id, offset, 32)
        if result.status is GetMessageStatus.MESSAGE_WAS_REMOVING and result.next_begin_offset > offset:
            offset = result.next_begin_offset
            continue
        if result.status is not GetMessageStatus.FOUND:
            return found
        found += [body_of(record) for record in result.messages]
        offset = result.next_begin_offset


def body_of(record: bytes | None) -> bytes:
    assert record is not None
    return decode_message(record).body


def expected_bodies(count: int) -> list[bytes]:
    return [BODY + str(index).encode() for index in range(count)]


def test_filling_the_disk_refuses_puts_cleanly_and_keeps_every_acked_message(disk, stores):
    # The queue's one file and its first reserved chunk hold every entry this disk's log can take,
    # all taken before the log fills the disk: here only the commit log meets the full disk. (With
    # small queue files, a dispatch that lags the puts on a loaded machine meets it first and holds
    # its entries until space returns: the tests below.)
    store = start_store(stores, disk / "store", mapped_file_size_consume_queue=4096 * 20)
    assert store.put_message(message(0)).ok
    assert store.wait_for_dispatch(timeout=10)
    acked, refusal = put_until_refused(store, start=1)
    acked = [0, *acked]
    # The put that needed a segment the disk has no room for: nothing of it was written.
    assert refusal.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert refusal.remark.startswith("create mapped file failed, server is busy or broken. (")
    assert "No space left" in refusal.remark or "free on its disk" in refusal.remark
    # From now on the store refuses at once, RocketMQ's status and remark, with the cause.
    again = store.put_message(message(len(acked)))
    assert again.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert again.remark.startswith(REFUSED)
    assert "cannot be allocated" in again.remark or "diskSpaceWarningLevelRatio" in again.remark
    info = store.runtime_info()
    assert info["diskFull"] == "true" and info["storeWritable"] == "false"
    assert int(info["runningFlags"]) & DISK_FULL
    assert info["storeNotWritableReason"] in again.remark
    # No half-made segment: every commit-log file has its full size and its blocks.
    for path in (disk / "store" / "commitlog").iterdir():
        assert path.stat().st_size == SEGMENT
        assert path.stat().st_blocks * 512 >= SEGMENT
    # Every acked message reads back once, in order.
    assert acked == list(range(len(acked)))
    assert bodies(store) == expected_bodies(len(acked))


def test_a_segment_the_disk_cannot_hold_is_not_created(disk, monkeypatch):
    files = MappedFileQueue(disk / "log", 2 * DISK_BYTES)
    with pytest.raises(SegmentAllocationError) as refused:
        files.create_file(0)
    assert refused.value.errno == errno.ENOSPC
    assert "2.0 MiB" in str(refused.value)
    assert files.files == [] and list((disk / "log").iterdir()) == []
    # The free-space check passed (a racing writer took the space): fallocate fails, the
    # file it began is removed.
    monkeypatch.setattr(mapped_file, "free_bytes", lambda _path: 1 << 40)
    with pytest.raises(SegmentAllocationError):
        files.create_file(0)
    assert files.files == [] and list((disk / "log").iterdir()) == []


def test_the_warning_level_refuses_writes_above_it_and_takes_them_again_below(disk, stores):
    store = start_store(stores, disk / "store")
    fill(disk, leave=free_bytes(disk) // 2)  # about half the disk used
    assert not store.check_disk()
    assert store.put_message(message(0)).ok
    store.config.disk_space_warning_level_ratio = 35  # a live change (updateBrokerConfig)
    assert store.check_disk()
    refused = store.put_message(message(1))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "above diskSpaceWarningLevelRatio 35%" in refused.remark
    store.config.disk_space_warning_level_ratio = 10  # below RocketMQ's lowest level: taken as 35
    assert store.disk_guard.warning_level == 35
    store.config.disk_space_warning_level_ratio = 90
    assert not store.check_disk()
    assert store.put_message(message(1)).ok
    assert store.runtime_info()["diskFull"] == "false"


def test_writes_are_taken_again_by_themselves_once_space_returns(disk, stores):
    # The clean service checks the disk each second; with forcible cleaning off, the retention
    # pass a full disk triggers keeps the unexpired segments this test reads back.
    store = start_store(stores, disk / "store", quiet=False, clean_file_forcibly_enable=False)
    assert store.put_message(message(0)).ok
    filler = fill(disk)
    acked, refusal = put_until_refused(store, start=1)
    assert refusal.status in (
        PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
        PutMessageStatus.SERVICE_NOT_AVAILABLE,
    )
    deadline = time.monotonic() + 10
    while store.runtime_info()["diskFull"] != "true":
        assert time.monotonic() < deadline, "the disk check never saw the full disk"
        time.sleep(0.05)
    filler.unlink()
    count = 1 + len(acked)
    while not store.put_message(message(count)).ok:
        assert time.monotonic() < deadline + 10, store.not_writable_reason()
        time.sleep(0.05)
    assert store.runtime_info()["storeWritable"] == "true"
    assert bodies(store) == expected_bodies(count + 1)


def wait_for_flag(store: MessageStore, bit: int) -> None:
    deadline = time.monotonic() + 10
    while not store.running_flags.is_set(bit):
        assert time.monotonic() < deadline, "dispatch never stopped"
        time.sleep(0.01)


def test_a_consume_queue_file_that_cannot_be_allocated_holds_dispatch_until_space_returns(disk, stores):
    store = start_store(stores, disk / "store")
    for index in range(CQ_ENTRIES):  # exactly one consume-queue file full
        assert store.put_message(message(index)).ok
    assert store.wait_for_dispatch(timeout=10)
    filler = fill(disk)
    # The commit log still has room reserved: the message is stored and acked…
    stored = store.put_message(message(CQ_ENTRIES))
    assert stored.ok and stored.append is not None and stored.append.logics_offset == CQ_ENTRIES
    # …but its consume-queue entry has no file to go into: dispatch stops there, writes wait.
    wait_for_flag(store, WRITE_LOGICS_QUEUE_ERROR)
    assert store.reput.stalled
    refused = store.put_message(message(CQ_ENTRIES + 1))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "consume-queue file, which cannot be allocated" in refused.remark
    # Reads go on: everything dispatched before is there, the held message not yet.
    assert store.get_max_offset_in_queue(TOPIC, 0) == CQ_ENTRIES
    assert store.get_message("g", TOPIC, 0, 0, 32).status is GetMessageStatus.FOUND
    assert (
        body_of(store.select_one_message_by_offset(stored.append.wrote_offset))
        == BODY + str(CQ_ENTRIES).encode()
    )
    assert store.check_disk()  # still no room: still held
    assert store.reput.stalled
    filler.unlink()
    assert not store.check_disk()
    assert not store.reput.stalled and store.running_flags.writeable
    after = store.put_message(message(CQ_ENTRIES + 1))
    assert after.ok and after.append is not None and after.append.logics_offset == CQ_ENTRIES + 1
    assert bodies(store) == expected_bodies(CQ_ENTRIES + 2)


def test_a_consume_queue_chunk_that_cannot_be_reserved_holds_dispatch_until_space_returns(
    disk, stores, monkeypatch
):
    """Consume-queue blocks are reserved a chunk ahead of the write position (a near-empty
    queue holds one chunk, not a whole file): the next chunk, not the next file, meets the
    full disk, and it is met before the entry is written through the mapping."""
    monkeypatch.setattr(ConsumeQueue, "RESERVE_CHUNK", 4096)  # 204.8 entries a chunk
    store = start_store(stores, disk / "store", mapped_file_size_consume_queue=1024 * 20)
    for index in range(204):  # the first chunk full but for 16 bytes
        assert store.put_message(message(index)).ok
    assert store.wait_for_dispatch(timeout=10)
    filler = fill(disk)
    stored = store.put_message(message(204))  # its entry straddles the chunk's end
    assert stored.ok and stored.append is not None and stored.append.logics_offset == 204
    wait_for_flag(store, WRITE_LOGICS_QUEUE_ERROR)
    assert store.get_max_offset_in_queue(TOPIC, 0) == 204
    assert store.get_message("g", TOPIC, 0, 200, 32).status is GetMessageStatus.FOUND
    filler.unlink()
    assert not store.check_disk()
    assert not store.reput.stalled and store.running_flags.writeable
    assert store.put_message(message(205)).ok
    assert bodies(store) == expected_bodies(206)


def test_an_index_file_that_cannot_be_allocated_holds_dispatch_until_space_returns(disk, stores):
    store = start_store(stores, disk / "store", max_index_num=16)
    for index in range(15):  # entry 0 of an index file is never used: 15 keys fill it
        assert store.put_message(message(index, f"k{index}")).ok
    assert store.wait_for_dispatch(timeout=10)
    filler = fill(disk)
    assert store.put_message(message(15, "k15")).ok
    wait_for_flag(store, WRITE_INDEX_FILE_ERROR)
    assert store.put_message(message(16)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    now_ms = int(time.time() * 1000)
    assert [m.body for m in store.query_message(TOPIC, "k3", 4, 0, now_ms + 1000)] == [BODY + b"3"]
    filler.unlink()
    assert not store.check_disk() and store.running_flags.writeable
    found = store.query_message(TOPIC, "k15", 4, 0, now_ms + 1000)
    assert [m.body for m in found] == [BODY + b"15"]  # indexed once space returned, once
    assert store.put_message(message(16)).ok
    assert bodies(store) == expected_bodies(17)


def test_a_restart_on_a_full_disk_serves_reads_and_takes_writes_once_space_returns(disk, stores):
    store = start_store(stores, disk / "store")
    filler = fill(disk, leave=SEGMENT // 2)  # the disk fills up while the store writes
    acked, _ = put_until_refused(store)
    store.shutdown()
    fill(disk)
    again = start_store(stores, disk / "store")
    assert bodies(again) == expected_bodies(len(acked))
    refused = again.put_message(message(len(acked)))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert refused.remark.startswith(REFUSED)
    assert "above diskSpaceWarningLevelRatio 90%" in refused.remark
    filler.unlink()
    assert not again.check_disk()
    assert again.put_message(message(len(acked))).ok
    assert bodies(again) == expected_bodies(len(acked) + 1)


def test_a_shutdown_whose_checkpoint_the_full_disk_cannot_take_still_closes_the_store(disk, stores):
    """CI once failed here: the timer flusher's last flush raised ENOSPC out of the store's
    shutdown, which then never closed its files. The store must shut down all the way and leave
    the abort file, so that the next start recovers as after a crash and loses nothing."""
    store = start_store(stores, disk / "store")
    acked, _ = put_until_refused(store)
    store.checkpoint.path.unlink(missing_ok=True)  # not written yet: its page needs the space
    filler = fill(disk)
    store.shutdown()
    assert not store.writability.running
    assert store.abort_file.exists()
    filler.unlink()
    again = start_store(stores, disk / "store")
    assert not again.last_exit_ok
    assert bodies(again) == expected_bodies(len(acked))


def test_retention_frees_a_disk_the_store_filled_and_writes_resume(disk, stores):
    store = start_store(stores, disk / "store")
    acked, _ = put_until_refused(store)
    assert store.check_disk()
    # Fuller than diskMaxUsedSpaceRatio: the oldest segments go at once (cleanFileForciblyEnable).
    removed = store.clean_service.run_once()
    assert removed and not store.check_disk()
    after = store.put_message(message(len(acked)))
    assert after.ok and after.append is not None and after.append.logics_offset == len(acked)
    assert store.wait_for_dispatch()  # the new message is readable before the store is read back
    remaining = bodies(store)
    expected = expected_bodies(len(acked) + 1)
    assert remaining and remaining == expected[len(expected) - len(remaining) :]


def test_recovery_that_cannot_allocate_starts_read_only_and_dispatches_everything_later(disk, stores):
    store = start_store(stores, disk / "store")
    for index in range(3 * CQ_ENTRIES):
        assert store.put_message(message(index)).ok
    store.shutdown()
    # The consume queues are lost (as after a crash before they were flushed): recovery must
    # make them again from the commit log, and the disk has no room for their files.
    shutil.rmtree(disk / "store" / "consumequeue")
    filler = fill(disk)
    again = start_store(stores, disk / "store")
    assert again.reput.stalled and again.running_flags.is_set(WRITE_LOGICS_QUEUE_ERROR)
    assert again.put_message(message(0)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    # Messages are read by their offset meanwhile (their queue is not back yet).
    assert body_of(again.select_one_message_by_offset(0)) == BODY + b"0"
    filler.unlink()
    assert not again.check_disk()
    # The next message continues the queue after those still waiting for dispatch at start.
    after = again.put_message(message(3 * CQ_ENTRIES))
    assert after.ok and after.append is not None and after.append.logics_offset == 3 * CQ_ENTRIES
    assert bodies(again) == expected_bodies(3 * CQ_ENTRIES + 1)


def test_a_sparse_segment_left_by_an_older_broker_stops_the_start_until_it_can_be_reserved(disk, stores):
    store = start_store(stores, disk / "store")
    for index in range(10):
        assert store.put_message(message(index)).ok
    end = store.max_physic_offset
    store.shutdown()
    # The older broker's fallback: a segment with a hole where nothing was written yet. On a
    # full tmpfs even reading that hole through a mapping is SIGBUS, so it is never mapped.
    segment = disk / "store" / "commitlog" / f"{0:020d}"
    page = os.sysconf("SC_PAGE_SIZE")
    data = segment.read_bytes()[: (end // page + 1) * page]
    segment.unlink()
    segment.write_bytes(data)
    os.truncate(segment, SEGMENT)
    assert segment.stat().st_blocks * 512 < SEGMENT
    filler = fill(disk)
    refused = MessageStore(disk / "store", small_config(mapped_file_size_commit_log=SEGMENT))
    with pytest.raises(SegmentAllocationError, match=f"cannot allocate 128.0 KiB for {segment.name}"):
        refused.start()
    filler.unlink()
    again = start_store(stores, disk / "store")
    assert segment.stat().st_blocks * 512 >= SEGMENT
    assert again.put_message(message(10)).ok
    assert bodies(again) == expected_bodies(11)


def test_a_segment_whose_creation_was_interrupted_is_dropped_when_the_disk_has_no_room(disk, stores):
    store = start_store(stores, disk / "store")
    for index in range(5):
        assert store.put_message(message(index)).ok
    store.shutdown()
    interrupted = disk / "store" / "commitlog" / f"{SEGMENT:020d}"
    interrupted.write_bytes(b"")  # killed between creating the file and reserving its blocks
    filler = fill(disk)
    again = start_store(stores, disk / "store")
    assert not interrupted.exists()
    assert bodies(again) == expected_bodies(5)
    filler.unlink()
    assert not again.check_disk()
    assert again.put_message(message(5)).ok


def test_without_forcible_cleaning_a_full_disk_deletes_only_expired_segments():
    now_ms = 100 * 3_600_000
    segments = [
        SegmentInfo("old", 0, 10, now_ms - 80 * 3_600_000, False),
        SegmentInfo("young", 10, 10, now_ms - 3_600_000, False),
        SegmentInfo("current", 20, 10, now_ms, True),
    ]
    not_delete_hour = f"{(time.localtime(now_ms / 1000).tm_hour + 12) % 24:02d}"
    forcibly = RetentionPolicy(72, not_delete_hour, 75)
    assert [s.path for s in forcibly.select_expired(segments, now_ms, 99.0)] == ["old", "young"]
    gently = RetentionPolicy(72, not_delete_hour, 75, clean_forcibly=False)
    assert [s.path for s in gently.select_expired(segments, now_ms, 99.0)] == ["old"]
    assert gently.select_expired(segments, now_ms, 50.0) == []  # not full, not the hour


def test_the_warning_level_key_takes_rocketmq_s_range():
    key = KEYS["diskSpaceWarningLevelRatio"]
    assert key.parse("90") == 90 and key.parse("35") == 35
    for bad in ("95", "34", "x"):
        with pytest.raises(ConfigValueError):
            key.parse(bad)
    assert KEYS["cleanFileForciblyEnable"].parse("false") is False


def test_a_config_file_the_full_disk_cannot_take_keeps_its_previous_content(disk):
    # topics.json, consumerOffset.json…: the broker persists them at start and stop, which
    # must not fail on a full disk.
    config = JsonConfigFile(disk / "config" / "topics.json")
    config.persist({"topics": {"a": 1}})
    fill(disk)
    config.persist({"topics": {"a": 1, "b": 2} | {f"t{n}": n for n in range(2000)}})
    assert config.load() == {"topics": {"a": 1}}
    assert sorted(p.name for p in (disk / "config").iterdir()) == ["topics.json"]
