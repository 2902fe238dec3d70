"""Issue 21, acceptance 1: a real broker process whose store is a small real filesystem (a tmpfs).

Seen before the fix: a fast producer filled a 64 MiB store in 5 s and the broker died of SIGBUS
(rc -7); restarted on the still-full disk it died again. Here a producer fills the disk: its
sends are refused with RocketMQ's code and remark, the broker stays alive and serves pulls of what
it stored, takes sends again by itself once space is freed, comes back up after being killed on
a full disk (serving reads, refusing writes), and at the end every acknowledged message is in the
queue exactly once, in order. A delayed message falling due while the disk is full is delivered
once space returns, once.
"""

from __future__ import annotations

import datetime
import json
import signal
import time

import pytest

from broker.client import Producer
from broker.client.errors import MQBrokerError, MQClientError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_messages
from broker.common.request_headers import PullMessageRequestHeader
from broker.local_cluster import LocalCluster, wait_until
from tests.small_disk import broker_on_small_disk, fill

DISK_BYTES = 6 * 1024 * 1024
TOPIC = "FullDiskTopic"
DELAYED = "FullDiskDelayedTopic"
DELAY_S = 2
GROUP = "FullDiskReader"
REFUSED = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [CL: "
)


def _not_now_hour() -> str:
    return f"{(datetime.datetime.now().hour + 12) % 24:02d}"


@pytest.fixture
def cluster(tmp_path):
    settings = {
        # Acked messages must survive the full disk: only expired segments may go.
        "fileReservedTime": 72,
        "deleteWhen": _not_now_hour(),
        "flushIntervalCommitLog": 50,
        "messageDelayLevel": f"{DELAY_S}s",
    }
    topics = (TOPIC, DELAYED)
    with broker_on_small_disk(
        tmp_path, DISK_BYTES, "FullDiskCluster", "broker-full", settings, topics
    ) as local:
        yield local


def body(number: int) -> bytes:
    return f"full-disk-{number:06d}".encode().ljust(1000, b".")


def broker_refusal(error: MQClientError) -> MQBrokerError:
    """The broker's answer inside the SDK's "failed after retries" error (or the error itself)."""
    refusal = error if isinstance(error, MQBrokerError) else error.__cause__
    assert isinstance(refusal, MQBrokerError), error
    return refusal


def produce_until_refused(producer: Producer, first: int, limit: int = 20_000):
    """Send until the broker refuses: (numbers acked, the broker's refusal)."""
    acked: list[int] = []
    for number in range(first, first + limit):
        try:
            result = producer.send(Message(TOPIC, body(number)))
        except MQClientError as error:
            return acked, broker_refusal(error)
        assert result.send_status == "SEND_OK"
        acked.append(number)
    raise AssertionError(f"{limit} messages fitted on a {DISK_BYTES}-byte disk")


def refused_send(producer: Producer, number: int) -> MQBrokerError:
    with pytest.raises(MQClientError) as refused:
        producer.send(Message(TOPIC, body(number)))
    return broker_refusal(refused.value)


def pull_all(cluster: LocalCluster, topic: str = TOPIC) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        header = PullMessageRequestHeader(
            consumer_group=GROUP,
            topic=topic,
            queue_id=0,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=0b0100,  # subscription given
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        response = cluster.request(RequestCode.PULL_MESSAGE, header)
        if response.code != ResponseCode.SUCCESS:
            return bodies
        messages = decode_messages(response.body)
        bodies += [m.body for m in messages]
        offset = messages[-1].queue_offset + 1


def runtime(cluster: LocalCluster) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert response.ok, response.remark
    return json.loads(response.body)["table"]


def send_again(producer: Producer, number: int, timeout: float = 15) -> None:
    """Send ``number`` until the broker takes it (it checks the disk every second)."""

    def sent() -> bool:
        try:
            return producer.send(Message(TOPIC, body(number))).send_status == "SEND_OK"
        except MQClientError as error:
            assert broker_refusal(error).response_code == ResponseCode.SERVICE_NOT_AVAILABLE, error
            return False

    wait_until(sent, timeout=timeout, interval=0.2, what=f"the broker taking message {number} again")


def test_a_full_disk_refuses_sends_keeps_serving_and_recovers(cluster):
    disk = cluster.disk
    producer = Producer("FullDiskProducer", cluster.namesrv_addr, retry_times=0, latency_fault_enable=False)
    producer.start()
    try:
        acked = list(range(5))  # the store's files exist; then the disk keeps ~1 MiB free
        for number in acked:
            assert producer.send(Message(TOPIC, body(number))).send_status == "SEND_OK"
        delayed = Message(DELAYED, b"due while the disk is full")
        delayed.delay_time_level = 1
        assert producer.send(delayed).send_status == "SEND_OK"
        due = time.monotonic() + DELAY_S
        filler = fill(disk, leave=1024 * 1024)
        more, refusal = produce_until_refused(producer, 5)
        acked += more
        # Refused as RocketMQ refuses: SYSTEM_ERROR for the send whose segment could not be
        # made (nothing of it written), SERVICE_NOT_AVAILABLE with the disk figures after.
        assert refusal.response_code in (ResponseCode.SYSTEM_ERROR, ResponseCode.SERVICE_NOT_AVAILABLE)
        refused = refused_send(producer, len(acked))
        assert refused.response_code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert (refused.remark or "").startswith(REFUSED)
        info = runtime(cluster)
        assert info["diskFull"] == "true" and info["storeWritable"] == "false"
        # Alive (no signal), and serving every acked message to a pull.
        assert cluster.broker.proc.poll() is None, "".join(cluster.broker.output)
        assert pull_all(cluster) == [body(n) for n in acked]
        # The delayed message fell due while the disk was full: its delivery waits.
        time.sleep(max(0.0, due + 1 - time.monotonic()))
        assert pull_all(cluster, DELAYED) == []

        filler.unlink()  # space returns: the broker takes sends again by itself
        send_again(producer, len(acked))
        acked.append(len(acked))
        assert runtime(cluster)["diskFull"] == "false"
        wait_until(lambda: pull_all(cluster, DELAYED), timeout=10, what="the delayed message")
        assert pull_all(cluster, DELAYED) == [b"due while the disk is full"]

        # Full again, then killed (as the SIGBUS did) and restarted on the still-full disk.
        before = len(acked)
        filler = fill(disk)
        more, _ = produce_until_refused(producer, len(acked))
        acked += more
        broker = cluster.broker
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait(10)
        cluster.start_broker()
        assert cluster.broker.proc.poll() is None
        # Reads are served at once: everything stored before the disk filled again, and the
        # later messages whose queue entries had room (one whose consume-queue file cannot be
        # allocated yet is dispatched when space returns).
        pulled = pull_all(cluster)
        assert len(pulled) >= before and pulled == [body(n) for n in acked[: len(pulled)]]
        assert refused_send(producer, len(acked)).response_code == ResponseCode.SERVICE_NOT_AVAILABLE

        filler.unlink()
        send_again(producer, len(acked))
        acked.append(len(acked))
        # Every acknowledged message, once, in the order it was acked.
        assert pull_all(cluster) == [body(n) for n in acked]
        # (The delayed message may be delivered again: the SIGKILL can lose the delay service's
        # progress, persisted every 10 s — at least once, as RocketMQ's after a crash.)
        assert set(pull_all(cluster, DELAYED)) == {b"due while the disk is full"}
        assert cluster.broker.proc.poll() is None
    finally:
        producer.shutdown()
