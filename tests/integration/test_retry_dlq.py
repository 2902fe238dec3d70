"""Issue 4 acceptance 2 (and 8 for it): consume retry through %RETRY%<group> and dead letters in
%DLQ%<group>, against a real name server and broker, checked through mqadmin as well."""

import copy
import json
import threading
from collections import defaultdict

import pytest

from broker.cli import main
from broker.client import BROADCASTING, ConsumeConcurrentlyStatus, Producer
from broker.common import message_const as const
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import SEMANTICS, cluster_fixture
from tests.cluster import SEMANTICS_CLUSTER as CLUSTER
from tests.polling import gathered

TOPIC = "RetryTopic"


# Every retry level is 1 s, so a retry chain of a few steps stays fast.
cluster = cluster_fixture(SEMANTICS, {"messageDelayLevel": "1s 1s 1s 1s"}, topics={TOPIC: 4})


@pytest.fixture(scope="module")
def producer(cluster):
    producer = Producer("retry-producer", cluster.namesrv_addr).start()
    yield producer
    producer.shutdown()


class Attempts:
    """Records each delivery; ``fail_times`` deliveries fail before one succeeds (None: always)."""

    def __init__(self, fail_times=None, delay_level=0):
        self.fail_times = fail_times
        self.delay_level = delay_level
        self.lock = threading.Lock()
        self.seen = defaultdict(list)

    def listener(self, messages, context):
        msg = messages[0]
        with self.lock:
            self.seen[msg.client_msg_id].append(copy.copy(msg))  # as it was at this delivery
            attempt = len(self.seen[msg.client_msg_id])
        if self.fail_times is None or attempt <= self.fail_times:
            context["delay_level_when_next_consume"] = self.delay_level
            if attempt % 2:
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            raise RuntimeError("an exception also means: consume later")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def count(self, msg_id):
        with self.lock:
            return len(self.seen[msg_id])


def mqadmin_json(capsys, *argv):
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def dead_letters(capsys, cluster, group, msg_id):
    return mqadmin_json(
        capsys, "queryMsgById", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}", "-i", msg_id
    )["messages"]


def send(producer, body: str) -> str:
    msg = Message(TOPIC, body.encode())
    msg.keys = [body]
    return producer.send(msg).msg_id


def test_always_failing_message_reaches_the_dlq_after_the_groups_max_reconsume_times(
    cluster, producer, capsys
):
    group = "always-fails"
    mqadmin_json(capsys, "updateSubGroup", "-n", cluster.namesrv_addr, "-c", CLUSTER, "-g", group, "-r", "2")
    attempts = Attempts()

    def own_message_fails(messages, context):
        # The topic also holds the other tests' messages: consume those, so that only this test's
        # message reaches the DLQ listed below.
        if messages[0].body != b"always-fails-1":
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        return attempts.listener(messages, context)

    consumer = cluster.push_consumer(group, TOPIC, own_message_fails, "fail-c")
    try:
        msg_id = send(producer, "always-fails-1")
        assert wait_until(lambda: attempts.count(msg_id) >= 3, timeout=40)
        found: list[dict] = []
        assert wait_until(lambda: gathered(found, _quiet(dead_letters, capsys, cluster, group, msg_id)))
    finally:
        consumer.shutdown()
    deliveries = attempts.seen[msg_id]
    assert len(deliveries) == 3  # the first delivery and retryMaxTimes=2 retries
    assert [m.reconsume_times for m in deliveries] == [0, 1, 2]
    assert all(m.topic == TOPIC and m.client_msg_id == msg_id for m in deliveries)
    dead = found[0]
    assert dead["msg_id"] == msg_id and dead["topic"] == f"%DLQ%{group}"
    assert dead["properties"][const.PROPERTY_RETRY_TOPIC] == TOPIC
    assert dead["properties"][const.PROPERTY_ORIGIN_MESSAGE_ID]
    assert dead["reconsume_times"] == 3
    assert dead["body"] == "always-fails-1"
    # The DLQ is write-only: kept for operators, never delivered to consumers.
    route = mqadmin_json(capsys, "topicRoute", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}")
    assert [q["perm"] for q in route["queue_datas"]] == [2]
    assert main(["consumeMessage", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}"]) != 0
    assert "forbidden" in capsys.readouterr().err
    # As with RocketMQ, an operator lists a group's dead letters by making the DLQ readable.
    dlq = f"%DLQ%{group}"
    perm = ["-r", "1", "-w", "1", "-p", "6"]
    mqadmin_json(capsys, "updateTopic", "-n", cluster.namesrv_addr, "-c", CLUSTER, "-t", dlq, *perm)
    listed: list[dict] = []
    assert wait_until(lambda: gathered(listed, _quiet(dlq_listing, capsys, cluster, dlq)))
    assert [(m["msg_id"], m["body"]) for m in listed] == [(msg_id, "always-fails-1")]


def dlq_listing(capsys, cluster, dlq):
    return mqadmin_json(capsys, "consumeMessage", "-n", cluster.namesrv_addr, "-t", dlq)["messages"]


def _quiet(query, *args):
    try:
        return query(*args)
    except AssertionError:
        return []


def test_failing_twice_then_succeeding_is_received_three_times_and_never_dead(cluster, producer, capsys):
    group = "fails-twice"
    attempts = Attempts(fail_times=2)
    consumer = cluster.push_consumer(group, TOPIC, attempts.listener, "twice-c")
    try:
        msg_id = send(producer, "fails-twice-1")
        assert wait_until(lambda: attempts.count(msg_id) >= 3, timeout=40)
        # A further delivery would come 1 s after a send-back: give it the chance to show up.
        assert not wait_until(lambda: attempts.count(msg_id) > 3, timeout=2.5)
    finally:
        consumer.shutdown()
    assert [m.reconsume_times for m in attempts.seen[msg_id]] == [0, 1, 2]
    assert main(["queryMsgById", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}", "-i", msg_id]) != 0
    capsys.readouterr()


def test_delay_level_minus_one_dead_letters_at_once(cluster, producer, capsys):
    group = "straight-to-dlq"
    attempts = Attempts(delay_level=-1)
    consumer = cluster.push_consumer(group, TOPIC, attempts.listener, "dlq-c")
    try:
        msg_id = send(producer, "straight-1")
        found: list[dict] = []
        assert wait_until(lambda: gathered(found, _quiet(dead_letters, capsys, cluster, group, msg_id)))
        assert not wait_until(lambda: attempts.count(msg_id) > 1, timeout=2.5)
    finally:
        consumer.shutdown()
    assert attempts.count(msg_id) == 1
    assert found[0]["reconsume_times"] == 1


def test_client_max_reconsume_times_overrides_the_group(cluster, producer, capsys):
    group = "client-max-one"
    attempts = Attempts()
    consumer = cluster.push_consumer(group, TOPIC, attempts.listener, "max1-c", max_reconsume_times=1)
    try:
        msg_id = send(producer, "client-max-1")
        found: list[dict] = []
        assert wait_until(lambda: gathered(found, _quiet(dead_letters, capsys, cluster, group, msg_id)))
    finally:
        consumer.shutdown()
    assert attempts.count(msg_id) == 2
    assert found[0]["reconsume_times"] == 2


def test_broadcasting_never_retries(cluster, producer, tmp_path):
    attempts = Attempts()
    consumer = cluster.push_consumer(
        "broadcast-fails", TOPIC, attempts.listener, "bc-c", message_model=BROADCASTING,
        offset_store_dir=str(tmp_path),
    )  # fmt: skip
    try:
        msg_id = send(producer, "broadcast-1")
        assert wait_until(lambda: attempts.count(msg_id) == 1, timeout=20)
        assert not wait_until(lambda: attempts.count(msg_id) > 1, timeout=2.5)
    finally:
        consumer.shutdown()


def test_send_back_refused_falls_back_to_consuming_locally(cluster, producer):
    group = "no-send-back"
    # A read-only retry topic makes the broker refuse the send-back (NO_PERMISSION).
    fields = {"topic": f"%RETRY%{group}", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4}
    assert cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields).ok
    attempts = Attempts(fail_times=2)
    consumer = cluster.push_consumer(group, TOPIC, attempts.listener, "local-c", retry_delay_s=0.3)
    try:
        msg_id = send(producer, "local-1")
        assert wait_until(lambda: attempts.count(msg_id) >= 3, timeout=20)
        assert not wait_until(lambda: attempts.count(msg_id) > 3, timeout=1.5)
    finally:
        consumer.shutdown()
    deliveries = attempts.seen[msg_id]
    # All three from the original queue: the same stored message, counted locally.
    assert len({m.commitlog_offset for m in deliveries}) == 1
    assert [m.reconsume_times for m in deliveries] == [0, 1, 2]
    assert cluster.max_offsets(f"%RETRY%{group}", 1) == 0


def test_a_client_resending_to_the_retry_topic_past_max_times_dead_letters(cluster, producer, capsys):
    group = "resends-itself"
    mqadmin_json(capsys, "updateSubGroup", "-n", cluster.namesrv_addr, "-c", CLUSTER, "-g", group, "-r", "3")
    fields = {
        "producerGroup": "p",
        "topic": f"%RETRY%{group}",
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": 0,
        "flag": 0,
        "properties": "KEYS\x01resent\x02",
        "reconsumeTimes": 3,
    }
    response = cluster.request(RequestCode.SEND_MESSAGE, fields, b"resent")
    assert response.ok, response.remark
    found = mqadmin_json(
        capsys, "queryMsgByKey", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}", "-k", "resent"
    )
    assert [m["body"] for m in found["messages"]] == ["resent"]
