"""Issue 22, first milestone, with real processes: a master streams its commit log to its slave
over the HA port; the slave holds the same bytes at the same offsets, answers offset and key
queries from its own queues and index, catches up when started late, and refuses writes.
A misconfigured slave is refused at start, or says clearly why it cannot replicate."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from broker.client import Producer
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_messages
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION
from broker.local_cluster import ROOT, free_port, wait_until, write_conf
from tests.cluster import add_slave, start_master_slave

TOPIC = "ha-topic"
QUEUES = 4
MESSAGES = 10_000
BATCH = 100


def _runtime(cluster, addr: str) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=addr)
    assert response.ok, response.remark
    return json.loads(response.body)["table"]


def _send(cluster, count: int, start: int = 0) -> None:
    producer = Producer("HA_TEST_PRODUCER", cluster.namesrv_addr).start()
    try:
        for first in range(start, start + count, BATCH):
            batch = []
            for i in range(first, min(first + BATCH, start + count)):
                msg = Message(TOPIC, f"message {i} ".encode() * (1 + i % 5))
                msg.keys, msg.tags = f"key-{i}", f"t{i % 3}"
                batch.append(msg)
            assert all(r.send_status == "SEND_OK" for r in producer.send_batch(batch))
    finally:
        producer.shutdown()


def _caught_up(cluster, master: str, slave: str) -> bool:
    master_end = _runtime(cluster, master)["commitLogMaxOffset"]
    return master_end != "0" and _runtime(cluster, slave)["commitLogMaxOffset"] == master_end


def _segments(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _max_offsets(cluster, addr: str) -> list[int]:
    offsets = []
    for queue_id in range(QUEUES):
        response = cluster.request(
            RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": queue_id}, addr=addr
        )
        offsets.append(int(response.field("offset")))
    return offsets


def _topics(cluster, addr: str) -> set[str]:
    response = cluster.request(RequestCode.GET_ALL_TOPIC_CONFIG, addr=addr)
    return set(json.loads(response.body)["topicConfigTable"])


def _consumer_offset(cluster, addr: str) -> int:
    fields = {"consumerGroup": "ha-group", "topic": TOPIC, "queueId": 2}
    response = cluster.request(RequestCode.QUERY_CONSUMER_OFFSET, fields, addr=addr)
    return int(response.field("offset")) if response.ok else -1


def _query_by_key(cluster, addr: str, key: str) -> list[bytes]:
    fields = {"topic": TOPIC, "key": key, "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2**62}
    response = cluster.request(RequestCode.QUERY_MESSAGE, fields, addr=addr)
    assert response.ok, response.remark
    return [m.body for m in decode_messages(response.body)]


def _create_topic(cluster) -> None:
    """On the master only: a slave refuses topic changes (its topics are its master's)."""
    fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES,
              "perm": 6, "topicFilterType": "SINGLE_TAG"}  # fmt: skip
    response = cluster.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, fields, addr=cluster.brokers["broker-ha"].addr
    )
    assert response.ok, response.remark
    cluster.wait_for_route(TOPIC)


@pytest.fixture
def pair(tmp_path):
    cluster = start_master_slave(tmp_path / "ha")
    try:
        _create_topic(cluster)
        yield cluster
    finally:
        cluster.stop()


def test_ten_thousand_messages_reach_the_slave_byte_for_byte(pair, tmp_path):
    """Acceptance 1: identical bytes and offsets; the slave's queues and index answer."""
    master, slave = pair.brokers["broker-ha"].addr, pair.brokers["broker-ha-s"].addr
    commit = {"consumerGroup": "ha-group", "topic": TOPIC, "queueId": 2, "commitOffset": 77}
    assert pair.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit, addr=master).ok
    _send(pair, MESSAGES)
    wait_until(
        lambda: _caught_up(pair, master, slave), timeout=60, what="the slave to reach the master's end"
    )
    # Metadata follows the master (SlaveSynchronize, every 10 s): the topic and the group's offset.
    wait_until(lambda: _consumer_offset(pair, slave) == 77, timeout=30, what="the offset on the slave")
    assert TOPIC in _topics(pair, slave)
    info = _runtime(pair, master)
    assert info["haSlaveCount"] == "1" and info["haSlaveBehindBytes"] == info["haSlaveBehindMillis"] == "0"
    assert info["haPushToSlaveMaxOffset"] == info["commitLogMaxOffset"]
    slave_info = _runtime(pair, slave)
    assert slave_info["brokerRole"] == "SLAVE" and slave_info["haMasterConnected"] == "true"
    assert slave_info["masterAddr"] == master

    # Stop both, so every byte is on disk, then compare the commit logs file by file.
    for process in pair.brokers.values():
        assert process.stop() == 0
    master_log = _segments(tmp_path / "ha" / "broker-ha" / "commitlog")
    assert len(master_log) > 1  # replication crossed segments (and their blank end records)
    assert _segments(tmp_path / "ha" / "broker-ha-s" / "commitlog") == master_log

    # The slave alone, restarted: its consume queues and index were built from the replicated log.
    slave = pair.start_broker("broker-ha-s").addr
    offsets = _max_offsets(pair, slave)
    assert sum(offsets) == MESSAGES and all(offsets)
    for i in (0, 4321, MESSAGES - 1):
        assert _query_by_key(pair, slave, f"key-{i}") == [f"message {i} ".encode() * (1 + i % 5)]
    # Pulled from the slave (by its address, brokerId 1): its consume queue's messages.
    pull = {"consumerGroup": "ha-group", "topic": TOPIC, "queueId": 2, "queueOffset": 0, "maxMsgNums": 32,
            "sysFlag": FLAG_SUBSCRIPTION, "commitOffset": -1, "suspendTimeoutMillis": 0, "subscription": "*",
            "subVersion": 0}  # fmt: skip
    pulled = pair.request(RequestCode.PULL_MESSAGE, pull, addr=slave)
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    messages = decode_messages(pulled.body)
    assert len(messages) == 32 and all(m.queue_id == 2 for m in messages)
    assert [m.queue_offset for m in messages] == list(range(32))
    assert _consumer_offset(pair, slave) == 77  # kept across the slave's restart


def test_a_slave_started_late_catches_up_and_refuses_writes(tmp_path):
    """A slave started after the master has messages gets all of them, then follows new ones;
    sends, topic changes and transaction ends are refused with RocketMQ's answers (acceptance 5)."""
    cluster = start_master_slave(tmp_path / "late", with_slave=False)
    try:
        cluster.create_topic(TOPIC, QUEUES)
        master = cluster.brokers["broker-ha"].addr
        _send(cluster, 2000)
        slave = add_slave(cluster, "broker-ha", "broker-ha-s").addr
        wait_until(lambda: _caught_up(cluster, master, slave), timeout=60, what="the late slave to catch up")
        _send(cluster, 500, start=2000)
        wait_until(lambda: _caught_up(cluster, master, slave), timeout=60, what="the slave to follow")
        assert _max_offsets(cluster, slave) == _max_offsets(cluster, master)
        assert _query_by_key(cluster, slave, "key-2100") == [b"message 2100 "]

        send = {"producerGroup": "g", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": ""}  # fmt: skip
        refused = cluster.request(RequestCode.SEND_MESSAGE, send, b"body", addr=slave)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "message store is slave mode, so write is not supported" in (refused.remark or "")
        topic = {"topic": "other", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
                 "perm": 6, "topicFilterType": "SINGLE_TAG"}  # fmt: skip
        refused = cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, topic, addr=slave)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "from slave broker" in (refused.remark or "")
        end = {"producerGroup": "g", "tranStateTableOffset": 0, "commitLogOffset": 0, "commitOrRollback": 8,
               "fromTransactionCheck": False, "msgId": "x", "transactionId": "x"}  # fmt: skip
        refused = cluster.request(RequestCode.END_TRANSACTION, end, addr=slave)
        assert refused.code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        cluster.stop()


def test_sync_master_answers_after_its_slave_has_the_message(tmp_path):
    """SYNC_MASTER double write through the SDK: SEND_OK while the slave confirms; with the slave
    stopped the message is stored and the send answered SLAVE_NOT_AVAILABLE, a status (as
    RocketMQ's client reports it), not an error."""
    cluster = start_master_slave(
        tmp_path / "sync", master_settings={"brokerRole": "SYNC_MASTER", "slaveTimeout": 2000}
    )
    try:
        _create_topic(cluster)
        master, slave = cluster.brokers["broker-ha"].addr, cluster.brokers["broker-ha-s"].addr
        wait_until(lambda: _runtime(cluster, master)["haSlaveCount"] == "1", timeout=30, what="the slave")
        producer = Producer("HA_SYNC_PRODUCER", cluster.namesrv_addr).start()
        try:
            results = [producer.send(Message(TOPIC, f"sync {i}".encode())) for i in range(20)]
            assert {r.send_status for r in results} == {"SEND_OK"}
            assert int(_runtime(cluster, slave)["commitLogMaxOffset"]) >= int(
                _runtime(cluster, master)["commitLogMaxOffset"]
            )  # acknowledged means on the slave
            assert cluster.brokers["broker-ha-s"].stop() == 0
            wait_until(
                lambda: _runtime(cluster, master)["haSlaveCount"] == "0", timeout=30, what="the slave gone"
            )
            alone = producer.send(Message(TOPIC, b"no slave"))
            assert alone.send_status == "SLAVE_NOT_AVAILABLE" and alone.queue_offset >= 0
        finally:
            producer.shutdown()
        assert sum(_max_offsets(cluster, master)) == 21  # every message stored, whatever its answer
    finally:
        cluster.stop()


def _batch_send(cluster, prefix: str, count: int) -> None:
    producer = Producer("HA_READ_PRODUCER", cluster.namesrv_addr).start()
    try:
        for first in range(0, count, BATCH):
            batch = [
                Message(TOPIC, f"{prefix}-{i}".encode()) for i in range(first, min(first + BATCH, count))
            ]
            assert all(r.send_status == "SEND_OK" for r in producer.send_batch(batch))
    finally:
        producer.shutdown()


def test_consumers_read_from_the_slave_while_the_master_is_down(tmp_path):
    """Acceptance 4 (no failover): the master stopped, a consumer group reads every message from
    the slave and keeps its offsets there; the consumer stops, the master returns, and the slave
    hands it the offsets committed meanwhile: the group, started again, gets only the new
    messages, from the master."""
    from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
    from broker.client.instance import MQClientInstance
    from tests.received_messages import ReceivedBodies

    cluster = start_master_slave(tmp_path / "reads")
    consumer = None
    try:
        _create_topic(cluster)
        master, slave = cluster.brokers["broker-ha"].addr, cluster.brokers["broker-ha-s"].addr
        _batch_send(cluster, "before", 300)
        wait_until(lambda: _caught_up(cluster, master, slave), timeout=60, what="the slave to catch up")
        wait_until(lambda: TOPIC in _topics(cluster, slave), timeout=30, what="the topic on the slave")
        assert cluster.brokers["broker-ha"].stop() == 0  # unregistered: routes name the slave only

        received = ReceivedBodies()
        instance = MQClientInstance(cluster.namesrv_addr, "ha-reader", heartbeat_interval_ms=500,
                                    route_interval_ms=500, rebalance_interval_ms=500)  # fmt: skip
        first = CONSUME_FROM_FIRST_OFFSET
        consumer = PushConsumer("ha-readers", cluster.namesrv_addr, consume_from_where=first,
                                instance=instance, persist_interval_ms=300)  # fmt: skip
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(received.listener)
        consumer.start()
        received.wait_for(lambda bodies: len(set(bodies)) == 300, timeout=30)

        def committed(addr: str) -> int:
            total = 0
            for queue_id in range(QUEUES):
                fields = {"consumerGroup": "ha-readers", "topic": TOPIC, "queueId": queue_id}
                response = cluster.request(RequestCode.QUERY_CONSUMER_OFFSET, fields, addr=addr)
                total += response.int_field("offset") if response.ok else 0
            return total

        wait_until(lambda: committed(slave) == 300, timeout=30, what="the offsets kept on the slave")
        consumer.shutdown()  # its offsets now live on the slave only
        consumer = None
        master = cluster.start_broker("broker-ha").addr
        wait_until(lambda: committed(master) == 300, timeout=30, what="the offsets handed to the master")
        _batch_send(cluster, "after", 100)
        again = MQClientInstance(cluster.namesrv_addr, "ha-reader-2", heartbeat_interval_ms=500,
                                 route_interval_ms=500, rebalance_interval_ms=500)  # fmt: skip
        consumer = PushConsumer("ha-readers", cluster.namesrv_addr, consume_from_where=first, instance=again)
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(received.listener)
        consumer.start()
        bodies = received.wait_for(lambda bodies: len(bodies) >= 400, timeout=30)
        assert len(bodies) == len(set(bodies)) == 400  # every message once
        assert set(bodies[300:]) == {f"after-{i}".encode() for i in range(100)}
    finally:
        if consumer is not None:
            consumer.shutdown()
        cluster.stop()


def test_with_slave_read_enable_a_master_sends_laggards_to_the_slave(tmp_path):
    """slaveReadEnable (RocketMQ's suggestWhichBrokerId): a pull reading further behind than
    accessMessageInMemoryMaxRatio of memory (0 here: any) is told to read from broker 1; without
    it, from the master. The SDK follows the suggestion, the slave sends a consumer back to its
    master when it finds nothing, and every message is consumed once."""
    from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
    from broker.client.instance import MQClientInstance
    from tests.received_messages import ReceivedBodies

    lagging = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
    cluster = start_master_slave(tmp_path / "suggest", master_settings=lagging)
    consumer = None
    try:
        _create_topic(cluster)
        master, slave = cluster.brokers["broker-ha"].addr, cluster.brokers["broker-ha-s"].addr
        _batch_send(cluster, "lag", 300)
        wait_until(lambda: _caught_up(cluster, master, slave), timeout=60, what="the slave to catch up")
        wait_until(lambda: TOPIC in _topics(cluster, slave), timeout=30, what="the topic on the slave")

        # A batch goes to one queue: 3 batches leave one of the 4 queues empty.
        queue = next(q for q, count in enumerate(_max_offsets(cluster, master)) if count)
        pull = {"consumerGroup": "ha-lag", "topic": TOPIC, "queueId": queue, "queueOffset": 0,
                "maxMsgNums": 8, "sysFlag": FLAG_SUBSCRIPTION, "commitOffset": -1, "suspendTimeoutMillis": 0,
                "subscription": "*", "subVersion": 0}  # fmt: skip
        answer = cluster.request(RequestCode.PULL_MESSAGE, pull, addr=master)
        assert (answer.code, answer.field("suggestWhichBrokerId")) == (ResponseCode.SUCCESS, "1"), (
            answer.remark
        )
        config = cluster.request(
            RequestCode.UPDATE_BROKER_CONFIG, body=b"slaveReadEnable=false\n", addr=master
        )
        assert config.ok, config.remark  # a live key
        assert (
            cluster.request(RequestCode.PULL_MESSAGE, pull, addr=master).field("suggestWhichBrokerId") == "0"
        )
        assert cluster.request(
            RequestCode.UPDATE_BROKER_CONFIG, body=b"slaveReadEnable=true\n", addr=master
        ).ok

        slave_reads_before = int(_runtime(cluster, slave)["getMessageTransferedMsgCount"])
        received = ReceivedBodies()
        instance = MQClientInstance(cluster.namesrv_addr, "ha-lagger", heartbeat_interval_ms=500,
                                    route_interval_ms=500, rebalance_interval_ms=500)  # fmt: skip
        first = CONSUME_FROM_FIRST_OFFSET
        consumer = PushConsumer("ha-lag", cluster.namesrv_addr, consume_from_where=first, instance=instance,
                                pull_batch_size=8)  # fmt: skip
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(received.listener)
        consumer.start()
        bodies = received.wait_for(lambda bodies: len(set(bodies)) == 300, timeout=30)
        assert len(bodies) == 300
        assert int(_runtime(cluster, slave)["getMessageTransferedMsgCount"]) > slave_reads_before
    finally:
        if consumer is not None:
            consumer.shutdown()
        cluster.stop()


def _start_broker_expecting_failure(conf) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port())],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("identity", "reason"),
    [
        ({"brokerId": 0, "brokerRole": "SLAVE"}, "brokerRole=SLAVE needs brokerId > 0"),
        ({"brokerId": 1}, "brokerRole=ASYNC_MASTER needs brokerId=0"),
        ({"brokerId": 1, "brokerRole": "SLAVE", "haMasterAddress": "nowhere"}, "haMasterAddress='nowhere'"),
    ],
)
def test_inconsistent_roles_are_refused_at_start(tmp_path, identity, reason):
    conf = write_conf(
        tmp_path / "broker.conf", {"brokerName": "b", "storePathRootDir": tmp_path / "s", **identity}
    )
    finished = _start_broker_expecting_failure(conf)
    assert finished.returncode == 2
    assert reason in finished.stderr


def test_a_slave_whose_master_is_unreachable_says_so_and_keeps_serving(tmp_path):
    cluster = start_master_slave(tmp_path / "lost", with_slave=False)
    try:
        closed = f"127.0.0.1:{free_port()}"  # nothing listens there
        # Its master not up yet (a slave contradicting a registered master is refused at start:
        # tests/integration/test_slave_identity.py).
        slave = add_slave(cluster, "broker-away", "broker-ha-s", {"haMasterAddress": closed})
        # A slave whose brokerName has no master (a wrong name): the name server names none.
        orphan = add_slave(cluster, "broker-nobody", "broker-orphan")

        def failed_to_connect() -> dict[str, str] | None:
            info = _runtime(cluster, slave.addr)
            return info if info["haConnectFailures"] != "0" else None

        info = wait_until(failed_to_connect, timeout=30, what="a failed connection to the master")
        assert info["haMasterConnected"] == "false" and info["haMasterAddress"] == closed
        assert f"cannot connect to the master's HA port {closed}" in info["haLastError"]
        slave.keep_draining()
        wait_until(lambda: any("replication from the master stopped" in line for line in slave.output),
                   timeout=30, what="the log line")  # fmt: skip
        assert slave.proc.poll() is None  # still serving

        def orphan_says_why() -> dict[str, str] | None:
            info = _runtime(cluster, orphan.addr)
            return info if "no master HA address yet" in info["haLastError"] else None

        orphan_info = wait_until(orphan_says_why, timeout=30, what="the orphan slave's reason")
        assert orphan_info["masterAddr"] == "" and orphan_info["haMasterConnected"] == "false"
        orphan.keep_draining()
        said = "knows no master for brokerName broker-nobody"
        wait_until(
            lambda: any(said in line for line in orphan.output), timeout=30, what="the orphan's log line"
        )
    finally:
        cluster.stop()


def test_a_master_and_its_slave_stopped_at_the_same_moment_both_exit_cleanly(pair):
    """Ctrl-C on ``make run-ha`` signals both at once; both must exit cleanly. (The race that once
    kept the slave running — its cancellation swallowed as the master closed the connection — is
    timing-dependent here; tests/store/test_ha_wire.py pins it deterministically.)"""
    master, slave = pair.brokers["broker-ha"], pair.brokers["broker-ha-s"]
    wait_until(lambda: _runtime(pair, slave.addr).get("haMasterConnected") == "true", timeout=30,
               what="the slave connected to its master")  # fmt: skip
    for process in (master, slave):
        process.proc.send_signal(signal.SIGTERM)
    for process in (master, slave):
        assert process.proc.wait(30) == 0, "".join(process.output[-20:])
