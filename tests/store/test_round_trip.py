"""Acceptance 1: 100,000 messages over 3 topics x 4 queues, every field back intact."""

import time

from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store.results import GetMessageStatus

TOPICS = ["orders", "payments", "audit"]
QUEUES = 4
TOTAL = 100_000


def _message(i: int) -> MessageExt:
    topic = TOPICS[i % 3]
    msg = MessageExt(
        topic=topic,
        body=f"body-{i}-".encode() * (1 + i % 5),
        flag=i % 7,
        queue_id=(i // 3) % QUEUES,
        born_timestamp=1_700_000_000_000 + i,
        born_host=("192.168.0.9", 50000 + i % 100),
        reconsume_times=i % 3,
    )
    msg.tags = f"tag{i % 10}"
    msg.keys = [f"key-{i}", f"group-{i % 50}"]
    msg.put_user_property("seq", str(i))
    return msg


def test_round_trip_of_100k_messages(open_store):
    store = open_store()
    sent = [_message(i) for i in range(TOTAL)]
    before = int(time.time() * 1000)
    results = [store.put_message(m) for m in sent]
    assert all(r.ok for r in results)
    assert store.wait_for_dispatch(timeout=60)
    assert len(store.commitlog.files.files) > 10  # 256 KiB segments rolled over

    received: dict[int, MessageExt] = {}
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            assert store.get_min_offset_in_queue(topic, queue_id) == 0
            offset, expected_count = 0, sum(1 for m in sent if m.topic == topic and m.queue_id == queue_id)
            assert store.get_max_offset_in_queue(topic, queue_id) == expected_count
            while True:
                result = store.get_message("g", topic, queue_id, offset, 32)
                if result.status is not GetMessageStatus.FOUND:
                    assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
                    break
                for raw, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
                    msg = decode_message(raw, check_crc=True)
                    assert msg.queue_offset == queue_offset == offset  # dense from 0
                    offset += 1
                    received[int(msg.properties["seq"])] = msg
            assert offset == expected_count

    assert len(received) == TOTAL
    for i, original in enumerate(sent):
        got = received[i]
        assert (got.topic, got.body, got.flag, got.queue_id) == (
            original.topic, original.body, original.flag, original.queue_id)  # fmt: skip
        assert got.properties == original.properties
        assert got.tags == original.tags and got.keys == original.keys
        assert got.born_timestamp == original.born_timestamp and got.born_host == original.born_host
        assert got.reconsume_times == original.reconsume_times
        assert got.store_timestamp >= before
        assert got.commitlog_offset == results[i].append.wrote_offset
        assert got.msg_id == results[i].append.msg_id

    # Lookup by commit-log offset.
    for i in (0, 1, TOTAL // 2, TOTAL - 1):
        assert store.look_message_by_offset(results[i].append.wrote_offset).body == sent[i].body

    # Lookup by key through the index (a unique key and a shared one).
    now = int(time.time() * 1000) + 1000
    hits = store.query_message("payments", "key-4", 10, 0, now)
    assert [int(m.properties["seq"]) for m in hits] == [4]
    shared = store.query_message("orders", "group-3", 5000, 0, now)
    assert sorted(int(m.properties["seq"]) for m in shared) == [
        i for i in range(TOTAL) if i % 50 == 3 and i % 3 == 0
    ]
    assert store.query_message("orders", "no-such-key", 10, 0, now) == []

    # Offset by time: everything was stored after `before`, nothing after `now`.
    assert store.get_offset_in_queue_by_time("audit", 2, before - 1) == 0
    assert store.get_offset_in_queue_by_time("audit", 2, now + 10_000) == store.get_max_offset_in_queue(
        "audit", 2
    )


def test_offset_by_time_splits_the_queue(open_store):
    clock = {"now": 1_000.0}
    store = open_store()
    store.commitlog._clock = lambda: clock["now"]
    for i in range(10):
        clock["now"] = 1_000.0 + i
        assert store.put_message(MessageExt(topic="T", body=b"x", queue_id=0)).ok
    store.wait_for_dispatch()
    assert store.get_offset_in_queue_by_time("T", 0, 1_004_000) == 4
    assert store.get_offset_in_queue_by_time("T", 0, 1_004_500) == 5
    assert store.get_earliest_message_time("T", 0) == 1_000_000


def test_batches_get_consecutive_offsets(open_store):
    store = open_store()
    batch = [MessageExt(topic="B", body=bytes([i]), queue_id=1) for i in range(32)]
    result = store.put_messages(batch)
    assert result.ok and result.append.msg_num == 32 and result.append.logics_offset == 0
    assert len(result.append.msg_id.split(",")) == 32
    assert store.put_messages(batch).append.logics_offset == 32
    store.wait_for_dispatch()
    got = store.get_message("g", "B", 1, 30, 4)
    assert [decode_message(r).body for r in got.messages] == [
        bytes([30]),
        bytes([31]),
        bytes([0]),
        bytes([1]),
    ]


def test_pull_statuses(open_store):
    store = open_store()
    assert store.get_message("g", "none", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for _ in range(3):
        store.put_message(MessageExt(topic="S", body=b"x", queue_id=0))
    store.wait_for_dispatch()
    assert store.get_message("g", "S", 0, 3, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_message("g", "S", 0, 99, 32)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and badly.next_begin_offset == 0


class _TagFilter:
    def __init__(self, code):
        self.code = code

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code == self.code

    def is_matched_by_commit_log(self, record):
        return True


def test_tag_filter_on_consume_queue(open_store):
    from broker.common.java_hash import java_string_hash

    store = open_store()
    for i in range(10):
        msg = MessageExt(topic="F", body=str(i).encode(), queue_id=0)
        msg.tags = "even" if i % 2 == 0 else "odd"
        store.put_message(msg)
    store.wait_for_dispatch()
    result = store.get_message("g", "F", 0, 0, 32, _TagFilter(java_string_hash("odd")))
    assert [decode_message(r).body for r in result.messages] == [b"1", b"3", b"5", b"7", b"9"]
    assert result.next_begin_offset == 10
    none = store.get_message("g", "F", 0, 0, 32, _TagFilter(java_string_hash("nope")))
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10


async def test_sync_flush_from_an_event_loop(open_store):
    import asyncio

    store = open_store(flush_disk_type="SYNC_FLUSH")
    results = await asyncio.gather(
        *(store.put_message_async(MessageExt(topic="S", body=b"%d" % i, queue_id=0)) for i in range(64))
    )
    assert all(r.ok for r in results)
    assert store.writer.group_commit.flushed_offset >= max(
        r.append.wrote_offset + r.append.wrote_bytes for r in results
    )
    assert sorted(r.append.logics_offset for r in results) == list(range(64))
