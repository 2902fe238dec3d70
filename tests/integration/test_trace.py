"""Acceptance 7: a traced message's send, each consume attempt, the retry and the DLQ arrival are
in its trace, in order, found by its msgId through the query function and ``mqadmin``."""

import contextlib
import io
import json
import threading

from broker import cli
from broker.client import CONSUME_FROM_FIRST_OFFSET, ConsumeConcurrentlyStatus, Producer, PushConsumer
from broker.client.admin import MQAdmin
from broker.client.trace import query_message_trace
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import ONE_BROKER, cluster_fixture

TOPIC, GROUP = "TracedTopic", "traced-consumer"


# Short delay levels: a retry (level 3 + reconsume times) is due after 1 s.
cluster = cluster_fixture(
    ONE_BROKER, {"messageDelayLevel": "1s 1s 1s 1s 1s 1s", "traceTopicEnable": "true"}, topics={TOPIC: 2}
)


def _events(cluster, msg_id):
    with MQAdmin(cluster.namesrv_addr) as admin:
        return query_message_trace(admin, msg_id)


def test_send_and_every_consume_attempt_are_traced_in_order(cluster):
    producer = Producer(
        "traced-producer", cluster.namesrv_addr, enable_trace=True, instance_name="tp"
    ).start()
    attempts, done = [], threading.Event()

    def fail_once(messages, context):
        attempts.append(messages[0].reconsume_times)
        if len(attempts) == 1:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP, cluster.namesrv_addr, enable_trace=True, retry_delay_s=0.05,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name="tc",
    )  # fmt: skip
    consumer.subscribe(TOPIC, "TagT")  # its own message: the topic also holds the other tests'
    consumer.register_message_listener(fail_once)
    consumer.start()
    try:
        msg = Message(TOPIC, b"traced body")
        msg.tags, msg.keys = "TagT", "order-42"
        result = producer.send(msg)
        assert done.wait(30)
    finally:
        producer.shutdown()  # flushes the buffered trace records
        consumer.shutdown()
    assert attempts == [0, 1]
    assert wait_until(lambda: len(_events(cluster, result.msg_id)) >= 6, timeout=30)
    events = _events(cluster, result.msg_id)
    assert [e.event for e in events] == [
        "send",
        "consume_before",
        "consume_after",
        "retry",
        "consume_before",
        "consume_after",
    ]
    retry = events.pop(3)
    assert (retry.group, retry.record.topic) == (GROUP, f"%RETRY%{GROUP}")
    send, before1, after1, before2, after2 = events
    assert (send.group, send.record.topic, send.record.tags, send.record.keys) == (
        "traced-producer",
        TOPIC,
        "TagT",
        "order-42",
    )
    assert send.record.offset_msg_id == result.offset_msg_id and send.record.success
    assert [before1.group, after1.group, before2.group, after2.group] == [GROUP] * 4
    assert send.record.client_host.endswith("@tp")
    assert all(e.record.client_host.endswith("@tc") for e in events[1:])
    events.insert(3, retry)
    assert (before1.record.retry_times, before2.record.retry_times) == (0, 1)
    assert (after1.record.success, after2.record.success) == (False, True)
    assert before1.record.request_id == after1.record.request_id != before2.record.request_id
    timestamps = [e.record.timestamp for e in events]
    assert timestamps == sorted(timestamps)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["queryMsgTraceById", "-n", cluster.namesrv_addr, "-i", result.msg_id, "--json"])
    assert code == 0
    shown = json.loads(out.getvalue())
    assert [e["event"] for e in shown["events"]] == [e.event for e in events]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["queryMsgTraceById", "-n", cluster.namesrv_addr, "-i", result.msg_id]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["#Event", "#Group", "#Client"]
    assert [line.split()[0] for line in lines[1:]] == [e.event for e in events]


def test_untraced_clients_write_no_trace_and_the_cli_says_so(cluster, capsys):
    producer = Producer("plain-producer", cluster.namesrv_addr, instance_name="pp").start()
    try:
        result = producer.send(Message(TOPIC, b"not traced"))
    finally:
        producer.shutdown()
    assert _events(cluster, result.msg_id) == []
    assert cli.main(["queryMsgTraceById", "-n", cluster.namesrv_addr, "-i", result.msg_id]) == 1
    assert "no trace of message" in capsys.readouterr().err


def test_retries_then_the_dead_letter_arrival_close_the_trace(cluster):
    group = "traced-doomed"
    producer = Producer("traced-producer-2", cluster.namesrv_addr, enable_trace=True, instance_name="tp2")
    producer.start()
    attempts = []

    def always_fail(messages, context):
        attempts.append(messages[0].reconsume_times)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = PushConsumer(
        group, cluster.namesrv_addr, enable_trace=True, max_reconsume_times=2,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET, instance_name="tc2",
    )  # fmt: skip
    consumer.subscribe(TOPIC, "TagDoomed")
    consumer.register_message_listener(always_fail)
    consumer.start()
    try:
        msg = Message(TOPIC, b"doomed body")
        msg.tags = "TagDoomed"
        result = producer.send(msg)
        assert wait_until(lambda: [e.event for e in _events(cluster, result.msg_id)][-1:] == ["dlq"], 40)
    finally:
        producer.shutdown()
        consumer.shutdown()
    events = _events(cluster, result.msg_id)
    attempt = ["consume_before", "consume_after"]
    assert [e.event for e in events] == ["send", *attempt, "retry", *attempt, "retry", *attempt, "dlq"]
    assert attempts == [0, 1, 2]
    assert events[-1].record.topic == f"%DLQ%{group}" and events[-1].group == group
    assert [e.record.retry_times for e in events if e.event == "consume_before"] == [0, 1, 2]
