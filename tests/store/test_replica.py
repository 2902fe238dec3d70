"""A slave's store written with its master's bytes (broker/store/replica.py): same offsets and
bytes, its own consume queues and index, gaps refused, a divergent tail cut consistently."""

import threading

import pytest

from broker.common.message import MessageExt
from broker.store.replica import ReplicationError
from broker.store.results import GetMessageStatus, PutMessageStatus

SEGMENT = 64 * 1024


def _message(i: int, topic: str = "orders") -> MessageExt:
    msg = MessageExt(topic=topic, body=f"body-{i}-".encode() * (1 + i % 7), queue_id=i % 3,
                     born_timestamp=1_700_000_000_000 + i, born_host=("10.0.0.9", 4000))  # fmt: skip
    msg.tags = f"t{i % 4}"
    msg.keys = [f"key-{i}"]
    return msg


def _fill(store, count: int, start: int = 0, topic: str = "orders") -> None:
    for i in range(start, start + count):
        assert store.put_message(_message(i, topic)).ok
    assert store.wait_for_dispatch(timeout=30)


def _replicate(master, slave, from_offset: int, batch: int) -> None:
    """What the HA connection does: the master's bytes in frames of at most ``batch`` bytes."""
    offset = from_offset
    replica = slave.replica_log()
    while (data := master.commit_log_data(offset, batch)) is not None:
        assert replica.append(offset, data) == offset + len(data)
        offset += len(data)
    assert slave.wait_for_dispatch(replica.scan_offset, timeout=30)


def _segments(store) -> dict[str, bytes]:
    directory = store.commitlog.files.directory
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _queue_contents(store, topic: str, queue_id: int) -> list[bytes]:
    found, offset = [], 0
    while (result := store.get_message("g", topic, queue_id, offset, 32)).status is GetMessageStatus.FOUND:
        found += [bytes(m) for m in result.messages]
        offset = result.next_begin_offset
    return found


@pytest.fixture
def pair(open_store, tmp_path):
    master = open_store(tmp_path / "master", mapped_file_size_commit_log=SEGMENT)
    slave = open_store(tmp_path / "slave", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    return master, slave


def test_slave_log_is_the_masters_bytes_with_its_own_queues_and_index(pair):
    master, slave = pair
    _fill(master, 1500)
    assert len(master.commitlog.files.files) > 2  # segments rolled over, sealed by blank records
    _replicate(master, slave, 0, 1000)  # frames end inside records: the walk waits for the rest
    assert slave.max_physic_offset == master.max_physic_offset
    assert _segments(slave) == _segments(master)
    for queue_id in range(3):
        assert slave.get_max_offset_in_queue("orders", queue_id) == master.get_max_offset_in_queue(
            "orders", queue_id
        )
        assert _queue_contents(slave, "orders", queue_id) == _queue_contents(master, "orders", queue_id)
    found = slave.query_message("orders", "key-777", 4, 0, 2**62)
    assert [m.body for m in found] == [_message(777).body]
    # Should the slave become master, its next message continues each queue.
    assert slave.commitlog.queue_offsets == master.commitlog.queue_offsets


def test_segment_seals_arriving_in_several_frames(pair):
    """Large messages leave large blank records at segment ends; small frames cut them up."""
    master, slave = pair
    for i in range(12):
        msg = _message(i)
        msg.body = bytes([65 + i]) * 25_000
        assert master.put_message(msg).ok
    assert master.wait_for_dispatch(timeout=30)
    assert len(master.commitlog.files.files) >= 4
    _replicate(master, slave, 0, 4096)
    assert _segments(slave) == _segments(master)
    assert _queue_contents(slave, "orders", 0) == _queue_contents(master, "orders", 0)


def test_truncating_right_after_a_segment_seal_does_not_wait_for_dispatch(pair):
    """The walk stands at the next segment's start, past the seal; dispatch ends at the last
    record before it. A cut then has nothing to wait for (it used to wait for the seal's end:
    30 s, on the event loop in a broker)."""
    master, slave = pair
    _fill(master, 1000)
    second = master.commitlog.files.files[1].file_from_offset
    replica = slave.replica_log()
    offset = 0
    while offset < second:  # exactly the first segment, its seal included
        data = master.commit_log_data(offset, second - offset)
        replica.append(offset, data)
        offset += len(data)
    assert replica.scan_offset == second and slave.wait_for_dispatch(replica.submitted_end, timeout=10)
    cut = master.get_commit_log_offset_in_queue("orders", 0, 10)
    finished = threading.Event()

    def truncate() -> None:
        replica.truncate(cut)
        finished.set()

    worker = threading.Thread(target=truncate)
    worker.start()
    assert finished.wait(10), "the cut waited for a dispatch that cannot come"
    worker.join()
    assert slave.max_physic_offset == cut
    _replicate(master, slave, cut, 32 * 1024)
    assert _segments(slave) == _segments(master)


def test_slave_refuses_puts_with_rocketmqs_status(pair):
    _, slave = pair
    result = slave.put_message(_message(1))
    assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "slave mode, so write is not supported" in result.remark
    assert (
        slave.runtime_info()["storeNotWritableReason"]
        == "message store is slave mode, so write is not supported"
    )


def test_a_slave_behind_catches_up_from_where_it_is(pair):
    master, slave = pair
    _fill(master, 300)
    _replicate(master, slave, 0, 32 * 1024)
    reached = slave.max_physic_offset
    _fill(master, 700, start=300)
    _replicate(master, slave, reached, 32 * 1024)
    assert _segments(slave) == _segments(master)
    assert _queue_contents(slave, "orders", 2) == _queue_contents(master, "orders", 2)


def test_gaps_and_frames_across_segments_are_refused_and_leave_nothing(pair):
    master, slave = pair
    _fill(master, 50)
    data = master.commit_log_data(0, 4096)
    replica = slave.replica_log()
    with pytest.raises(ReplicationError, match="empty commit log starts at a segment"):
        replica.append(100, data)
    replica.append(0, data)
    with pytest.raises(ReplicationError, match="ends at 4096"):
        replica.append(8192, data)
    with pytest.raises(ReplicationError, match="cross a segment end"):
        replica.append(4096, bytes(SEGMENT))
    assert slave.max_physic_offset == 4096


def test_bytes_that_are_no_record_are_cut_and_refused(pair):
    master, slave = pair
    _fill(master, 20)
    good = master.commit_log_data(0, 10_000)
    replica = slave.replica_log()
    replica.append(0, good)
    reached = replica.scan_offset
    with pytest.raises(ReplicationError, match="not a record"):
        replica.append(slave.max_physic_offset, b"\x00\x00\x00\x30garbage!" * 4)
    assert slave.max_physic_offset == reached  # cut back to the last whole record


def test_truncating_a_divergent_tail_keeps_log_queues_and_index_consistent(open_store, tmp_path):
    """The slave holds records the master does not (it wrote them while it was master, say):
    cutting back to the master's end leaves queues, queue offsets and index ending there too,
    across a segment boundary, and the master's records then follow at the same offsets."""
    master = open_store(tmp_path / "m", mapped_file_size_commit_log=SEGMENT)
    slave = open_store(tmp_path / "s", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    # The divergent history: the master's first 400 records, then messages of its own.
    writer = open_store(tmp_path / "w", mapped_file_size_commit_log=SEGMENT)
    _fill(master, 400)
    _replicate(master, writer, 0, 32 * 1024)
    common = master.max_physic_offset
    _fill(writer, 800, start=5000, topic="orders")
    _fill(writer, 50, start=9000, topic="other")
    _replicate(writer, slave, 0, 32 * 1024)
    assert slave.max_physic_offset > common + SEGMENT  # the tail spans whole segments
    assert slave.replica_log().truncate(common) == writer.max_physic_offset - common

    assert slave.max_physic_offset == common
    assert all(int(name) <= common for name in _segments(slave))
    assert _segments(slave) == _segments(master)
    for queue_id in range(3):
        assert slave.get_max_offset_in_queue("orders", queue_id) == master.get_max_offset_in_queue(
            "orders", queue_id
        )
    assert slave.get_max_offset_in_queue("other", 0) == 0
    assert slave.query_message("orders", "key-5100", 4, 0, 2**62) == []  # stale index hits are verified away
    assert slave.query_message("orders", "key-100", 4, 0, 2**62)

    _fill(master, 600, start=400)  # the master goes on; the slave follows from the cut
    _replicate(master, slave, common, 32 * 1024)
    assert _segments(slave) == _segments(master)
    for queue_id in range(3):
        assert _queue_contents(slave, "orders", queue_id) == _queue_contents(master, "orders", queue_id)
    assert slave.commitlog.queue_offsets == master.commitlog.queue_offsets
    assert [m.body for m in slave.query_message("orders", "key-900", 4, 0, 2**62)] == [_message(900).body]


def test_truncated_slave_recovers_to_the_cut_after_restart(open_store, tmp_path):
    master = open_store(tmp_path / "m", mapped_file_size_commit_log=SEGMENT)
    _fill(master, 600)
    slave = open_store(tmp_path / "s", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    _replicate(master, slave, 0, 32 * 1024)
    cut = master.get_commit_log_offset_in_queue("orders", 0, 100)  # a record boundary
    slave.replica_log().truncate(cut)
    slave.shutdown()
    again = open_store(tmp_path / "s", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    assert again.max_physic_offset == cut
    assert again.get_max_offset_in_queue("orders", 0) == 100
    _replicate(master, again, cut, 32 * 1024)
    assert _segments(again) == _segments(master)


def test_a_cut_across_a_consume_queue_file_boundary_cuts_the_queue_too(open_store, tmp_path):
    """A divergent tail longer than a consume-queue file: the cut empties the queue's last file
    and goes on into the one before (it stopped there, leaving entries beyond the cut)."""
    master = open_store(
        tmp_path / "m", mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=50 * 20
    )
    slave = open_store(
        tmp_path / "s", mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=50 * 20,
        broker_role="SLAVE",
    )  # fmt: skip
    _fill(master, 90)  # 30 per queue
    _replicate(master, slave, 0, 32 * 1024)
    common = master.max_physic_offset
    writer = open_store(
        tmp_path / "w", mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=50 * 20
    )
    _replicate(master, writer, 0, 32 * 1024)
    _fill(writer, 300, start=5000)  # 100 more per queue: into the queue's third file
    _replicate(writer, slave, common, 32 * 1024)
    assert slave.get_max_offset_in_queue("orders", 0) == 130
    slave.replica_log().truncate(common)
    for queue_id in range(3):
        assert slave.get_max_offset_in_queue("orders", queue_id) == 30
    _fill(master, 60, start=90)
    _replicate(master, slave, common, 32 * 1024)
    for queue_id in range(3):
        assert _queue_contents(slave, "orders", queue_id) == _queue_contents(master, "orders", queue_id)
    assert slave.commitlog.queue_offsets == master.commitlog.queue_offsets


def _set_role(store, role: str) -> None:
    """What a broker's role switch does to its store: puts follow the role."""
    store.config.broker_role = role
    writability = getattr(store, "writability", None)  # the store split into modules, or not yet
    (writability.update if writability is not None else store._update_writable)()


def _keys(store, topic: str = "orders") -> list[str]:
    from broker.common.message_codec import decode_message

    return [decode_message(raw).keys[0] for q in range(3) for raw in _queue_contents(store, topic, q)]


def test_a_slave_that_was_master_meanwhile_follows_after_its_own_records(open_store, tmp_path):
    """Slave, then master (its own puts, dispatched by the put path), then slave again: the
    replicated records that follow are walked from the log's end, not from where the last
    replication stopped (which handed the master's own records to dispatch a second time, and
    took them for an incomplete tail to cut)."""
    first = open_store(tmp_path / "m", mapped_file_size_commit_log=SEGMENT)
    node = open_store(tmp_path / "n", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    _fill(first, 200)
    _replicate(first, node, 0, 32 * 1024)
    _set_role(node, "ASYNC_MASTER")
    _fill(node, 150, start=1000)  # its own records, as master
    # Its own records are whole: nothing to cut should it switch again (they were once cut).
    assert node.replica_log().cut_incomplete_tail() == node.max_physic_offset
    other = open_store(tmp_path / "o", mapped_file_size_commit_log=SEGMENT, broker_role="SLAVE")
    _replicate(node, other, 0, 32 * 1024)  # a slave of it, which becomes the next master
    _set_role(node, "SLAVE")
    _set_role(other, "ASYNC_MASTER")
    reached = node.max_physic_offset
    _fill(other, 100, start=2000)
    _replicate(other, node, reached, 32 * 1024)
    assert _segments(node) == _segments(other)
    keys = _keys(node)
    assert sorted(keys) == sorted(_keys(other)) and len(keys) == len(set(keys)) == 450
    assert slave_index_hits(node, "key-1100") == 1
    assert node.commitlog.queue_offsets == other.commitlog.queue_offsets


def slave_index_hits(store, key: str) -> int:
    return len(store.query_message("orders", key, 8, 0, 2**62))


def test_cut_incomplete_tail_before_taking_puts(pair):
    """A slave whose master went away mid-record becomes master: the half record is cut, so
    its own first record starts at a record boundary and every record reads back."""
    master, slave = pair
    _fill(master, 100)
    replica = slave.replica_log()
    end = master.max_physic_offset
    replica.append(0, master.commit_log_data(0, end - 10))  # the last record's last 10 bytes are missing
    assert slave.max_physic_offset == end - 10
    boundary = replica.cut_incomplete_tail()
    assert boundary == slave.max_physic_offset == master.get_commit_log_offset_in_queue("orders", 99 % 3, 33)
    assert replica.cut_incomplete_tail() == boundary  # nothing more to cut
    _set_role(slave, "ASYNC_MASTER")
    _fill(slave, 20, start=500)
    assert slave.wait_for_dispatch(timeout=30)
    keys = _keys(slave)
    assert len(keys) == 119 and "key-99" not in keys and "key-519" in keys
