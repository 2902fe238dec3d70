"""Issue 19 items 3 and 4 through a real name server, broker and mqadmin.

3. After retention deletes commit-log segments — and after a restart — each queue's min offset is
   its first message that still exists; consume stats do not count deleted messages as lag.
4. updateBrokerConfig either changes what the running broker does (maxMessageSize, retention's
   fileReservedTime / deleteWhen / diskMaxUsedSpaceRatio) or says the key needs a restart
   (messageDelayLevel) and reports the value as pending; bad values and unknown keys are refused
   before anything is written; a bad broker.conf stops the broker with a plain message.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main as mqadmin_main
from broker.client import Producer
from broker.client.errors import MQBrokerError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.local_cluster import ROOT, EngineProcess, free_port, start_broker, start_namesrv, wait_until
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

CLUSTER = "RetentionCluster"
TOPIC = "RetentionTopic"
GROUP = "RetentionLaggingGroup"
SEGMENT_BYTES = 64 * 1024
BODY = b"x" * 1000  # about 50 messages a segment
ALL_HOURS = ";".join(f"{h:02d}" for h in range(24))
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def _not_now_hour() -> str:
    """A delete hour twelve hours away: retention must not run on the clock during the test."""
    return f"{(datetime.datetime.now().hour + 12) % 24:02d}"


class RetentionBroker:
    """A name server and a broker with 64 KiB commit-log segments and a retention pass every
    100 ms, restartable on the same port and store."""

    def __init__(self, workdir: Path, retention: str = "") -> None:
        self.conf = workdir / "broker.conf"
        self.conf.write_text(
            f"brokerClusterName={CLUSTER}\nbrokerName=broker-r\nbrokerId=0\n"
            f"storePathRootDir={workdir / 'store'}\nautoCreateTopicEnable=true\n"
            f"mappedFileSizeCommitLog={SEGMENT_BYTES}\nmappedFileSizeConsumeQueue=120000\n"
            "maxHashSlotNum=20000\nmaxIndexNum=80000\nregisterBrokerIntervalMillis=500\n"
            "cleanResourceInterval=100\n"
            + (retention or f"fileReservedTime=72\ndeleteWhen={_not_now_hour()}\n")
        )
        self.port = free_port()
        self.namesrv = start_namesrv()
        self.broker: EngineProcess | None = None
        self.remoting = SyncRemotingClient()
        try:
            self.start()
        except BaseException:
            self.stop()
            raise

    @property
    def addr(self) -> str:
        assert self.broker is not None  # started
        return self.broker.addr

    def start(self) -> None:
        self.broker = start_broker(self.conf, self.namesrv.addr, self.port)

    def restart(self) -> None:
        assert self.broker is not None  # started
        assert self.broker.stop() == 0, "".join(self.broker.output)
        self.start()

    def stop(self) -> None:
        self.remoting.close()
        for process in (self.broker, self.namesrv):
            if process is not None:
                process.stop()

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        request = create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)
        assert self.remoting.invoke(self.addr, request).ok

    def produce(self, count: int, body: bytes = BODY) -> list[tuple[int, int]]:
        """Send ``count`` messages to queue 0; (queue offset, commit-log offset) of each."""
        producer = Producer("RetentionProducer", self.namesrv.addr).start()
        try:
            placed = []
            for _ in range(count):
                result = producer.send(Message(TOPIC, body))
                assert result.send_status == "SEND_OK"
                placed.append((result.queue_offset, decode_offset_msg_id(result.offset_msg_id)[1]))
            return placed
        finally:
            producer.shutdown()


def mqadmin(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = mqadmin_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def ok(*argv: str) -> str:
    code, out, err = mqadmin(*argv)
    assert code == 0, f"mqadmin {' '.join(argv)} exited {code}: {err}"
    return out


def ok_json(*argv: str) -> Any:
    return json.loads(ok(*argv, "--json"))


def commitlog_min_offset(broker: RetentionBroker) -> int:
    return int(ok_json("brokerStatus", "-b", broker.addr)["brokers"][broker.addr]["commitLogMinOffset"])


def queue_status(broker: RetentionBroker) -> dict[str, int]:
    queues = ok_json("topicStatus", "-n", broker.namesrv.addr, "-t", TOPIC)["queues"]
    (queue,) = [q for q in queues if q["queue_id"] == 0]
    return queue


def lag_of(broker: RetentionBroker, group: str) -> int:
    progress = ok_json("consumerProgress", "-n", broker.namesrv.addr, "-g", group, "-t", TOPIC)
    return sum(q["diff"] for q in progress["queues"])


def first_surviving(placed: list[tuple[int, int]], min_commitlog_offset: int) -> int:
    return next(queue_offset for queue_offset, offset in placed if offset >= min_commitlog_offset)


def start_with_topic(workdir: Path, retention: str = "") -> RetentionBroker:
    broker = RetentionBroker(workdir, retention)
    try:
        ok("updateTopic", "-b", broker.addr, "-t", TOPIC, "-r", "1", "-w", "1")
        assert wait_until(lambda: mqadmin("topicRoute", "-n", broker.namesrv.addr, "-t", TOPIC)[0] == 0, 15)
    except BaseException:
        broker.stop()
        raise
    return broker


@pytest.fixture
def broker(tmp_path):
    broker = start_with_topic(tmp_path)
    yield broker
    broker.stop()


def assert_min_offset_is_first_surviving_message(broker: RetentionBroker, placed, group: str) -> int:
    """topicStatus's min offset is the first message retention kept; the group's lag counts
    only the messages that exist; reading from the minimum starts there. Returns that offset."""
    expected_min = first_surviving(placed, commitlog_min_offset(broker))
    assert expected_min > 0
    # One retention pass deletes the segments, then corrects each queue's minimum: a moment apart
    # (RocketMQ's order too), so the queue's figure is read once that pass has ended.
    wait_until(lambda: queue_status(broker)["min_offset"] == expected_min, timeout=15)
    status = queue_status(broker)
    assert (status["min_offset"], status["max_offset"]) == (expected_min, len(placed))
    assert lag_of(broker, group) == len(placed) - expected_min
    read = ok_json(
        "consumeMessage", "-n", broker.namesrv.addr, "-t", TOPIC, "-b", "broker-r", "-i", "0", "-c", "1"
    )
    assert [m["queue_offset"] for m in read["messages"]] == [expected_min]
    return expected_min


def test_min_offsets_after_retention_and_a_restart_point_at_surviving_messages(tmp_path):
    # Retention set in broker.conf to delete every sealed segment at once.
    broker = start_with_topic(tmp_path, f"fileReservedTime=0\ndeleteWhen={ALL_HOURS}\n")
    try:
        broker.commit_offset(GROUP, TOPIC, 0, 0)  # a group that never got far
        placed = broker.produce(300)  # about six 64 KiB segments
        current_segment = placed[-1][1] // SEGMENT_BYTES * SEGMENT_BYTES
        assert wait_until(lambda: commitlog_min_offset(broker) == current_segment, timeout=30)
        before = assert_min_offset_is_first_surviving_message(broker, placed, GROUP)
        broker.restart()
        assert commitlog_min_offset(broker) == current_segment
        assert assert_min_offset_is_first_surviving_message(broker, placed, GROUP) == before
    finally:
        broker.stop()


def test_retention_keys_changed_at_run_time_take_effect_at_once(broker):
    broker.commit_offset(GROUP, TOPIC, 0, 0)  # a group that never got far
    placed = broker.produce(300)  # about six 64 KiB segments
    assert commitlog_min_offset(broker) == 0

    # Fresh segments and a delete hour far away: only the two new values together delete them.
    assert "applied now: fileReservedTime=0" in ok(
        "updateBrokerConfig", "-b", broker.addr, "-k", "fileReservedTime", "-v", "0"
    )
    ok("updateBrokerConfig", "-b", broker.addr, "-k", "deleteWhen", "-v", ALL_HOURS)
    assert wait_until(lambda: commitlog_min_offset(broker) > 0, timeout=30)
    # Every sealed segment expires, so retention stops at the one being written.
    assert wait_until(lambda: commitlog_min_offset(broker) == placed[-1][1] // SEGMENT_BYTES * SEGMENT_BYTES)

    before = assert_min_offset_is_first_surviving_message(broker, placed, GROUP)
    broker.restart()
    assert commitlog_min_offset(broker) == placed[-1][1] // SEGMENT_BYTES * SEGMENT_BYTES
    assert assert_min_offset_is_first_surviving_message(broker, placed, GROUP) == before


def test_bad_values_and_unknown_keys_are_refused_and_nothing_is_written(broker):
    before = broker.conf.read_bytes()
    code, _, err = mqadmin(
        "updateBrokerConfig", "-b", broker.addr, "-k", "diskMaxUsedSpaceRatio", "-v", "abc"
    )
    assert code == 1
    assert "SYSTEM_ERROR" in err and "diskMaxUsedSpaceRatio='abc'" in err and "whole number" in err
    code, _, err = mqadmin("updateBrokerConfig", "-b", broker.addr, "-k", "diskMaxUsedSpaceRatio", "-v", "99")
    assert code == 1 and "between 10 and 95" in err
    code, _, err = mqadmin("updateBrokerConfig", "-b", broker.addr, "-k", "noSuchKey", "-v", "1")
    assert code == 1 and "unknown broker config key: noSuchKey" in err
    code, _, err = mqadmin("updateBrokerConfig", "-b", broker.addr, "-k", "brokerName", "-v", "other")
    assert code == 1 and "NO_PERMISSION" in err and "cannot change brokerName at run time" in err
    assert broker.conf.read_bytes() == before
    assert (
        ok_json("getBrokerConfig", "-b", broker.addr)["brokers"][broker.addr]["diskMaxUsedSpaceRatio"] == "75"
    )
    broker.restart()  # the broker.conf it starts from is still good


def test_disk_ratio_changed_at_run_time_deletes_at_once(broker):
    placed = broker.produce(200)
    used = float(ok_json("brokerStatus", "-b", broker.addr)["brokers"][broker.addr]["commitLogDiskRatio"])
    if used <= 0.10:
        pytest.skip(f"the disk is only {used:.0%} used: a 10 % ratio cannot count as full here")
    # Segments young and the delete hour far away: only a full disk deletes them.
    out = ok("updateBrokerConfig", "-b", broker.addr, "-k", "diskMaxUsedSpaceRatio", "-v", "10")
    assert "applied now: diskMaxUsedSpaceRatio=10" in out
    assert wait_until(lambda: commitlog_min_offset(broker) > 0, timeout=30)
    assert "diskMaxUsedSpaceRatio=10" in broker.conf.read_text()
    status = queue_status(broker)
    assert status["min_offset"] == first_surviving(placed, commitlog_min_offset(broker))


def test_max_message_size_lowered_refuses_larger_sends_at_once(broker):
    producer = Producer("SizeProducer", broker.namesrv.addr, retry_times=0).start()
    large = os.urandom(8000)  # random: the producer's compression cannot shrink it
    try:
        assert producer.send(Message(TOPIC, large)).send_status == "SEND_OK"
        ok("updateBrokerConfig", "-b", broker.addr, "-k", "maxMessageSize", "-v", "4096")
        assert (
            ok_json("getBrokerConfig", "-b", broker.addr)["brokers"][broker.addr]["maxMessageSize"] == "4096"
        )
        with pytest.raises(MQBrokerError) as refused:
            producer.send(Message(TOPIC, large))
        assert refused.value.response_code == ResponseCode.MESSAGE_ILLEGAL
        assert "4096" in str(refused.value)
        assert producer.send(Message(TOPIC, b"y" * 1000)).send_status == "SEND_OK"
    finally:
        producer.shutdown()


def test_delay_levels_need_a_restart_and_say_so(broker):
    out = ok("updateBrokerConfig", "-b", broker.addr, "-k", "messageDelayLevel", "-v", "1s 2s")
    assert "needs restart: messageDelayLevel=1s 2s" in out
    data = ok_json("getBrokerConfig", "-b", broker.addr)
    assert data["brokers"][broker.addr]["messageDelayLevel"] == DEFAULT_DELAY_LEVELS
    assert data["pending_restart"][broker.addr] == {"messageDelayLevel": "1s 2s"}
    assert "(needs restart: 1s 2s pending)" in ok("getBrokerConfig", "-b", broker.addr)
    assert "messageDelayLevel=1s 2s" in broker.conf.read_text()

    broker.restart()
    data = ok_json("getBrokerConfig", "-b", broker.addr)
    assert data["brokers"][broker.addr]["messageDelayLevel"] == "1s 2s"
    assert data["pending_restart"][broker.addr] == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("diskMaxUsedSpaceRatio", "abc"),
        ("deleteWhen", "25"),
        ("fileReservedTime", "-1"),
        ("archiveUri", "s3a://bucket/segments"),
    ],
)
def test_a_bad_broker_conf_stops_the_broker_with_a_plain_message(tmp_path, key, value):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=bad\nstorePathRootDir={tmp_path / 'store'}\n{key}={value}\n")
    result = subprocess.run(
        [sys.executable, "-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert f"{key}='{value}'" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
