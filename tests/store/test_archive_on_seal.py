"""Archive on seal (issue 19 item 9): a commit-log segment is copied to the archive once the log
rolls past it — not only when retention deletes it — and a restart archives what was missed."""

from __future__ import annotations

import orjson

from broker.common.message import MessageExt
from broker.local_cluster import wait_until
from broker.store.archive import SegmentArchiver
from broker.store.message_store import MessageStore

from .conftest import small_config

SEGMENT = 64 * 1024


def _fill(store: MessageStore, segments: int) -> None:
    """Put messages until the log has rolled past ``segments`` segments."""
    i = 0
    while len(store.commitlog.files.files) <= segments:
        assert store.put_message(MessageExt(topic="seal", body=b"%06d" % i * 200, queue_id=0)).ok
        i += 1


def _archived(archive) -> list[str]:
    return SegmentArchiver(str(archive)).list_archived()


def test_a_segment_is_archived_when_the_log_rolls_past_it(tmp_path):
    archive = tmp_path / "archive"
    store = MessageStore(tmp_path / "store", small_config(mapped_file_size_commit_log=SEGMENT,
                                                          archive_uri=str(archive)))  # fmt: skip
    store.start()
    try:
        _fill(store, 2)
        sealed = store.commitlog.files.files[:2]
        current = store.commitlog.files.files[-1]
        names = [m.path.name for m in sealed]
        # Retention never runs here (its interval is an hour and nothing is 72 h old).
        assert wait_until(lambda: _archived(archive) == names, timeout=20), _archived(archive)
        for mapped in sealed:
            assert (archive / "commitlog" / mapped.path.name).read_bytes() == mapped.path.read_bytes()
        assert current.path.name not in _archived(archive)  # still being written
        leftovers = [p.name for p in (archive / "commitlog").iterdir() if not p.name.isdigit()]
        assert leftovers == []  # no temporary copy left behind
    finally:
        store.shutdown()


def test_a_restart_archives_segments_sealed_while_nothing_archived_them(tmp_path):
    archive = tmp_path / "archive"
    plain = MessageStore(tmp_path / "store", small_config(mapped_file_size_commit_log=SEGMENT))
    plain.start()
    _fill(plain, 3)
    sealed = [m.path.name for m in plain.commitlog.files.files[:3]]
    plain.shutdown()

    for _ in range(2):  # the second start finds everything archived and copies nothing again
        store = MessageStore(tmp_path / "store", small_config(mapped_file_size_commit_log=SEGMENT,
                                                              archive_uri=str(archive)))  # fmt: skip
        store.start()
        try:
            assert wait_until(lambda: _archived(archive) == sealed, timeout=20), _archived(archive)
            assert store.archive_service is not None and store.archive_service.archive_sealed() == []
        finally:
            store.shutdown()
    manifest = [orjson.loads(line) for line in (archive / "manifest.jsonl").read_bytes().splitlines()]
    assert [entry["name"] for entry in manifest] == sealed  # each segment copied once


def test_a_copy_of_another_stores_segment_with_the_same_name_is_replaced(tmp_path):
    archive = tmp_path / "archive"
    stale = archive / "commitlog" / f"{0:020d}"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\x01" * SEGMENT)  # same name and size, other content
    store = MessageStore(tmp_path / "store", small_config(mapped_file_size_commit_log=SEGMENT,
                                                          archive_uri=str(archive)))  # fmt: skip
    store.start()
    try:
        _fill(store, 1)
        first = store.commitlog.files.files[0]
        assert wait_until(lambda: stale.read_bytes() == first.path.read_bytes(), timeout=20)
    finally:
        store.shutdown()
