"""Issue 4 acceptance 1: delayed messages against a real name server and broker."""

import json
import threading
import time
from collections import Counter

from broker.cli import main
from broker.client import ConsumeConcurrentlyStatus, Producer
from broker.common import fastjson
from broker.common import message_const as const
from broker.common.batch_codec import encode_batch
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import SEMANTICS, cluster_fixture

TOPIC = "DelayTopic"
LEVELS_MS = [1000, 2000, 3000]


cluster = cluster_fixture(
    SEMANTICS, {"messageDelayLevel": "1s 2s 3s", "flushDelayOffsetInterval": "200"}, {TOPIC: 4}, "function"
)


class Arrivals:
    def __init__(self):
        self.lock = threading.Lock()
        self.at: dict[bytes, list[int]] = {}
        self.messages = {}

    def listener(self, messages, context):
        now = int(time.time() * 1000)
        with self.lock:
            for msg in messages:
                self.at.setdefault(msg.body, []).append(now)
                self.messages[msg.body] = msg
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def count(self):
        with self.lock:
            return sum(len(times) for times in self.at.values())


def send_delayed(producer, prefix: str, levels, per_level: int):
    sent = {}
    for level in levels:
        for i in range(per_level):
            msg = Message(TOPIC, f"{prefix}-L{level}-{i}".encode())
            msg.delay_time_level = level
            msg.keys = [f"{prefix}-key-{level}-{i}"]
            started = int(time.time() * 1000)
            assert producer.send(msg).send_status == "SEND_OK"
            sent[msg.body] = (level, started)
    return sent


def test_messages_arrive_no_earlier_than_their_level(cluster):
    arrivals = Arrivals()
    consumer = cluster.push_consumer("delay-group", TOPIC, arrivals.listener, "delay-c")
    producer = Producer("delay-producer", cluster.namesrv_addr).start()
    try:
        immediate = Message(TOPIC, b"now")
        assert producer.send(immediate).send_status == "SEND_OK"
        sent = send_delayed(producer, "d", [1, 2, 3, 5], per_level=5)  # 5 is clamped to the last level
        assert wait_until(lambda: arrivals.count() == len(sent) + 1, timeout=30)
        for body, (level, sent_at) in sent.items():
            due = sent_at + LEVELS_MS[min(level, len(LEVELS_MS)) - 1]
            assert arrivals.at[body][0] >= due, (body, arrivals.at[body][0] - due)
            delivered = arrivals.messages[body]
            assert delivered.topic == TOPIC
            assert const.PROPERTY_DELAY_TIME_LEVEL not in delivered.properties
            assert delivered.properties[const.PROPERTY_REAL_TOPIC] == TOPIC
        # Each message was re-written exactly once to the real topic.
        assert cluster.max_offsets(TOPIC, 4) == len(sent) + 1
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_broker_restart_before_due_loses_and_duplicates_nothing(cluster, tmp_path, capsys):
    producer = Producer("delay-producer", cluster.namesrv_addr).start()
    try:
        sent = send_delayed(producer, "r", [1, 3], per_level=20)
    finally:
        producer.shutdown()
    cluster.restart_broker()
    # The level-3 messages (3 s) were certainly not all due at the stop: progress was kept.
    saved = json.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert int(saved.get("3", 0)) < 20
    arrivals = Arrivals()
    consumer = cluster.push_consumer("restart-group", TOPIC, arrivals.listener, "restart-c")
    try:
        assert wait_until(lambda: arrivals.count() >= len(sent), timeout=30)
        assert set(arrivals.at) == set(sent)
        assert cluster.max_offsets(TOPIC, 4) == len(sent)
        assert Counter(len(times) for times in arrivals.at.values()) == Counter({1: len(sent)})
        response = cluster.request(RequestCode.GET_ALL_DELAY_OFFSET)
        assert fastjson.loads(response.body)["offsetTable"] == {"1": 20, "3": 20}
        # mqadmin brokerStatus shows each level's progress as RocketMQ does: delivered,stored.
        assert main(["brokerStatus", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)["brokers"][cluster.broker_addr]
        assert (status["scheduleMessageOffset_1"], status["scheduleMessageOffset_3"]) == ("20,20", "20,20")
        assert status["scheduleMessageOffset_2"] == "0,0"
    finally:
        consumer.shutdown()


def test_bad_delay_input_is_refused_with_a_reason(cluster):
    fields = {"producerGroup": "p", "topic": TOPIC, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}
    bad = cluster.request(RequestCode.SEND_MESSAGE, {**fields, "properties": "DELAY\x01soon\x02"}, b"x")
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "DELAY" in bad.remark
    batch = Message(TOPIC, b"in-a-batch")
    batch.delay_time_level = 1
    refused = cluster.request(
        RequestCode.SEND_BATCH_MESSAGE, {**fields, "properties": "", "batch": "true"}, encode_batch([batch])
    )
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL and "batched" in refused.remark
    assert cluster.max_offsets(TOPIC, 4) == 0
