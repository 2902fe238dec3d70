"""Issue 19 item 3: after retention deleted commit-log segments, a restarted store's consume
queues start at their first message that still exists (RocketMQ's correctMinOffset at recovery),
not at an entry pointing into a deleted segment."""

import os
from datetime import datetime

from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus

from .conftest import small_config


def _at_hour(hour: int) -> float:
    return datetime(2026, 11, 20, hour, 30).timestamp()


def _first_live_offset(store: MessageStore, topic: str, queue_id: int) -> int:
    """The first logical offset whose commit-log record is still there (read entry by entry)."""
    queue = store.find_consume_queue(topic, queue_id)
    assert queue is not None
    offset = 0
    while offset < queue.max_offset:
        entry = queue.files.find_file(offset * 20)
        assert entry is not None
        commitlog_offset = int.from_bytes(entry.view[offset * 20 - entry.file_from_offset :][:8], "big")
        if commitlog_offset >= store.commitlog.min_offset:
            return offset
        offset += 1
    return offset


def test_min_offsets_after_retention_survive_a_restart(tmp_path):
    clock = {"now": _at_hour(4)}
    config = small_config(mapped_file_size_commit_log=64 * 1024, file_reserved_time=72, delete_when="04")
    store = MessageStore(tmp_path / "store", config, clock=lambda: clock["now"])
    store.start()
    try:
        for i in range(600):
            assert store.put_message(MessageExt(topic="r", body=b"%05d" % i * 100, queue_id=i % 2)).ok
        store.wait_for_dispatch()
        old = store.commitlog.files.files[:3]
        four_days_ago = clock["now"] - 96 * 3600
        for mapped in old:
            os.utime(mapped.path, (four_days_ago, four_days_ago))
        assert len(store.clean_service.run_once()) == 3
        at_runtime = {q: store.get_min_offset_in_queue("r", q) for q in (0, 1)}
        assert all(offset > 0 for offset in at_runtime.values())
    finally:
        store.shutdown()

    again = MessageStore(tmp_path / "store", config, clock=lambda: clock["now"])
    again.start()
    try:
        for queue_id in (0, 1):
            min_offset = again.get_min_offset_in_queue("r", queue_id)
            assert min_offset == at_runtime[queue_id] == _first_live_offset(again, "r", queue_id)
            found = again.get_message("g", "r", queue_id, min_offset, 1)
            assert found.status is GetMessageStatus.FOUND
            assert decode_message(found.messages[0]).body == b"%05d" % (min_offset * 2 + queue_id) * 100
            # The earliest message time is that of a message that exists.
            assert again.get_earliest_message_time("r", queue_id) > 0
    finally:
        again.shutdown()
