"""Issue 31 §1 against a real broker process: 100 bytes overwritten in a stopped broker's commit log
(1 MiB segments, 1 KiB messages); after the restart the SDK gets every other message, the damage
shows in runtime info and ``mqadmin brokerStatus``, and ``mqadmin purgeDamagedCommitLog`` closes
it. Before the fix the restart cut the log at the damage (1,851 messages gone in the store-level
test of the same geometry) and nothing but "started (last exit clean)" was logged. The second
segment's seal is damaged too (attack break 3): before, no range and a new slave's copy stopped
there for ever (serving 880 of 3,008 in the attack); after, a range found at start-up, sent to
the slave as a blank end record.
"""

from __future__ import annotations

import contextlib
import io
import json
import time

import pytest

from broker.cli import main
from broker.client.admin import MQAdmin, MQBrokerError
from broker.client.producer import Producer
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.store.quarantine import filler_record
from tests.cluster import ONE_BROKER, add_slave, cluster_fixture
from tests.store.damage_fixtures import body_of, hit_by, overwrite

TOPIC = "DamagedLogTopic"
QUEUES = 2
SEGMENT = 1024 * 1024
cluster = cluster_fixture(ONE_BROKER.with_settings(mappedFileSizeCommitLog=SEGMENT), topics={TOPIC: QUEUES})


def _mqadmin(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _consume_all(admin: MQAdmin, addr: str) -> tuple[dict[int, int], list[int]]:
    """Index -> commit-log offset of every intact message pulled, and the indexes of any pulled
    with wrong bytes (the SDK checks each body's CRC on receipt too)."""
    intact: dict[int, int] = {}
    wrong: list[int] = []
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            result = admin.pull_messages(addr, TOPIC, queue_id, offset, 32)
            for msg in result.messages:
                index = int(msg.body[:8])
                if msg.body == body_of(index):
                    intact[index] = msg.commitlog_offset
                else:
                    wrong.append(index)
            if result.next_begin_offset <= offset or result.status == "NO_NEW_MSG":
                break
            offset = result.next_begin_offset
    return intact, wrong


@pytest.fixture(scope="module")
def damaged(cluster):
    """Three segments of acknowledged messages, a clean stop, 100 bytes overwritten in the middle
    of the first segment, a restart: (admin, broker address, offsets, where the damage is)."""
    producer = Producer("DamagedLogProducer", cluster.namesrv_addr).start()
    offsets: list[int] = []
    try:
        while not offsets or offsets[-1] < 2 * SEGMENT + SEGMENT // 4:
            batch = [Message(TOPIC, body_of(len(offsets) + i)) for i in range(32)]
            for result in producer.send_batch(batch):  # one result, the batch's ids joined by commas
                assert result.send_status == "SEND_OK"
                offsets.extend(decode_offset_msg_id(msg_id)[1] for msg_id in result.offset_msg_id.split(","))
    finally:
        producer.shutdown()
    name = next(iter(cluster.brokers))
    assert cluster.brokers[name].stop() == 0
    at = SEGMENT // 2
    overwrite(cluster.workdir / "store", at)
    # The second segment's seal (its blank end record) too: no message points there, so only
    # start-up finds it; a slave copying the segment stopped there for ever before (attack break 3).
    last = max(i for i, offset in enumerate(offsets) if offset < 2 * SEGMENT)
    overwrite(cluster.workdir / "store", 2 * offsets[last] - offsets[last - 1], b"\xab" * 8)
    cluster.start_broker(name)
    admin = MQAdmin(cluster.namesrv_addr)
    yield admin, cluster.broker_addr, offsets, at
    admin.close()


def test_sdk_gets_every_intact_message_and_the_damage_is_reported(damaged):
    admin, addr, offsets, at = damaged
    end = offsets[-1] + (offsets[-1] - offsets[-2])
    intact, wrong = _consume_all(admin, addr)
    lost = set(range(len(offsets))) - set(intact)
    assert wrong == []
    assert lost and lost <= hit_by(offsets, end, at) and len(lost) <= 2
    assert all(intact[i] == offsets[i] for i in intact)  # consume queues point at the survivors
    info = admin.broker_runtime_info(addr)
    assert info["commitLogDamagedRanges"] == "2"
    detail, seal = json.loads(info["commitLogDamagedDetail"])
    assert detail["from"] == offsets[min(lost)] and detail["segment"] == f"{0:020d}"
    assert (seal["segment"], seal["to"]) == (f"{SEGMENT:020d}", 2 * SEGMENT)
    sizes = [r["to"] - r["from"] for r in (detail, seal)]
    assert int(info["commitLogDamagedBytes"]) == sum(sizes) and min(sizes) > 0
    code, out, _err = _mqadmin("brokerStatus", "-n", admin.namesrv_addrs[0], "-b", addr)
    assert code == 0 and "commitLogDamagedRanges" in out
    assert "ERROR: 2 damaged commit-log range(s)" in out


def test_a_new_slave_copies_past_the_quarantined_range(cluster, damaged):
    """The master sends the range as a purge would write it (before: a slave's copy stopped at
    the garbled header for ever); the slave serves every surviving message."""
    admin, addr, _offsets, _at = damaged
    intact, _wrong = _consume_all(admin, addr)  # the damage is quarantined (by now, or before)
    slave = add_slave(
        cluster, next(iter(cluster.brokers)), "damaged-slave", {"mappedFileSizeCommitLog": SEGMENT}
    )
    master_end = admin.broker_runtime_info(addr)["commitLogMaxOffset"]
    deadline = time.monotonic() + 30
    while True:  # the log copied, and the topic (synced from the master every few seconds)
        assert time.monotonic() < deadline, "the slave did not copy the whole log"
        if admin.broker_runtime_info(slave.addr)["commitLogMaxOffset"] == master_end:
            with contextlib.suppress(MQBrokerError):
                from_slave, wrong = _consume_all(admin, slave.addr)
                break
        time.sleep(0.2)
    assert wrong == [] and from_slave == intact


def test_purge_refuses_a_range_whose_bytes_are_sound_now_and_writes_nothing(cluster, damaged):
    """The bytes changed since the range was found (restored from a backup): a sound record starts
    there now. Before: the purge overwrote it, trusting the recorded range (the attack destroyed
    586 intact messages with forged ranges). After: SYSTEM_ERROR saying why, nothing written."""
    admin, addr, _offsets, _at = damaged
    _consume_all(admin, addr)
    detail = json.loads(admin.broker_runtime_info(addr)["commitLogDamagedDetail"])[0]
    segment = cluster.workdir / "store" / "commitlog" / detail["segment"]
    start, size = detail["from"] % SEGMENT, detail["to"] - detail["from"]
    damaged_bytes = segment.read_bytes()[start : start + size]
    overwrite(cluster.workdir / "store", detail["from"], bytes(filler_record(detail["from"], size, 1)))
    try:
        refused = cluster.request(RequestCode.PURGE_DAMAGED_COMMIT_LOG, {}, addr=addr)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "a sound record starts at its first byte" in (refused.remark or "")
        assert "nothing was overwritten" in (refused.remark or "")
        assert admin.broker_runtime_info(addr)["commitLogDamagedRanges"] == "2"
        assert segment.read_bytes()[start : start + size] == bytes(filler_record(detail["from"], size, 1))
    finally:
        overwrite(cluster.workdir / "store", detail["from"], damaged_bytes)


def test_purge_refuses_an_offset_no_range_starts_at_then_purges(cluster, damaged):
    admin, addr, offsets, _at = damaged
    garbled = cluster.request(RequestCode.PURGE_DAMAGED_COMMIT_LOG, {"fromOffset": "12ab"}, addr=addr)
    assert garbled.code == ResponseCode.SYSTEM_ERROR and "fromOffset" in (garbled.remark or "")
    _consume_all(admin, addr)  # the damage is found (by the first test, or now)
    detail, _seal = json.loads(admin.broker_runtime_info(addr)["commitLogDamagedDetail"])
    n = admin.namesrv_addrs[0]
    code, _out, err = _mqadmin("purgeDamagedCommitLog", "-n", n, "-b", addr, "-f", str(detail["from"] + 1))
    assert code != 0 and "no quarantined damaged range starts at commit-log offset" in err
    assert admin.broker_runtime_info(addr)["commitLogDamagedRanges"] == "2"  # nothing purged
    code, out, err = _mqadmin("purgeDamagedCommitLog", "-n", n, "-b", addr, "-f", str(detail["from"]))
    assert code == 0, err
    assert f"at {detail['from']}-{detail['to']}" in out
    assert admin.broker_runtime_info(addr)["commitLogDamagedRanges"] == "1"
    assert [r.to_offset for r in admin.purge_damaged_commit_log(addr)] == [2 * SEGMENT]  # the seal
    info = admin.broker_runtime_info(addr)
    assert (info["commitLogDamagedRanges"], info["commitLogDamagedBytes"]) == ("0", "0")
    assert admin.purge_damaged_commit_log(addr) == []  # nothing open any more
    intact, wrong = _consume_all(admin, addr)  # the survivors are all still there
    assert wrong == [] and len(intact) >= len(offsets) - 2
