"""Issue 4 acceptance 3: transactional messages against a real name server and broker."""

import json
import threading
from collections import Counter

import pytest

from broker.cli import main
from broker.client.admin import MQAdmin
from broker.client.instance import MQClientInstance
from broker.client.transaction_producer import LocalTransactionState, TransactionProducer
from broker.common.codes import RequestCode, ResponseCode
from broker.common.errors import MQError
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE
from broker.local_cluster import wait_until
from tests.cluster import SEMANTICS, start
from tests.polling import gathered
from tests.received_messages import DeliveryCounts

TOPIC = "TxTopic"
CHECK_MAX = 3
COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)  # fmt: skip


@pytest.fixture
def cluster(tmp_path):
    settings = {
        "transactionCheckInterval": "300",
        "transactionTimeOut": "500",
        "transactionCheckMax": str(CHECK_MAX),
    }
    cluster = start(SEMANTICS, tmp_path, settings)
    cluster.create_topic(TOPIC)
    yield cluster
    cluster.stop()


class LocalTransactions:
    """The application's side: what each body's local transaction did, and what a check says."""

    def __init__(self, on_execute: dict, on_check: dict):
        self.on_execute, self.on_check = on_execute, on_check
        self.lock = threading.Lock()
        self.checks: Counter[str] = Counter()

    def execute_local_transaction(self, msg, arg):
        return self.on_execute[msg.body.decode()]

    def check_local_transaction(self, msg):
        body = msg.body.decode()
        with self.lock:
            self.checks[body] += 1
        answer = self.on_check[body]
        if answer is None:
            raise RuntimeError("the application cannot tell")
        return answer


def start_producer(cluster, listener, name="tx-p"):
    return TransactionProducer(
        "tx-group", cluster.namesrv_addr, listener, instance=cluster.instance(name)
    ).start()


def read_topic(capsys, cluster, topic):
    code = main(["consumeMessage", "-n", cluster.namesrv_addr, "-t", topic, "--json"])
    out, _ = capsys.readouterr()
    return json.loads(out)["messages"] if code == 0 else []


def test_commit_rollback_and_checked_outcomes(cluster, capsys):
    app = LocalTransactions(
        on_execute={"commit": COMMIT, "rollback": ROLLBACK, "checked": UNKNOW, "never": UNKNOW},
        on_check={"checked": COMMIT, "never": None},
    )
    received = DeliveryCounts()
    consumer = cluster.push_consumer("tx-consumers", TOPIC, received.listener, "tx-c")
    producer = start_producer(cluster, app)
    try:
        results = {
            body: producer.send_message_in_transaction(Message(TOPIC, body.encode()))
            for body in app.on_execute
        }
        assert {b: r.local_transaction_state for b, r in results.items()} == app.on_execute
        assert wait_until(lambda: received.seen[b"commit"] == 1 and received.seen[b"checked"] == 1)
        parked: list[dict] = []
        assert wait_until(lambda: gathered(parked, read_topic(capsys, cluster, "TRANS_CHECK_MAX_TIME_TOPIC")))
        # Give a wrong extra delivery or check the time to happen before judging.
        assert not wait_until(
            lambda: received.seen.total() > 2 or app.checks["never"] > CHECK_MAX, timeout=1.5
        )
    finally:
        producer.shutdown()
        consumer.shutdown()
    assert received.seen == Counter({b"commit": 1, b"checked": 1})
    # "checked" may be asked again if its answer is slower than a round; the copy it names is then
    # superseded, so it is still committed once (asserted above).
    assert app.checks["checked"] >= 1 and app.checks["never"] == CHECK_MAX
    assert [m["body"] for m in parked] == ["never"]
    assert parked[0]["properties"]["REAL_TOPIC"] == TOPIC


def test_broker_restart_keeps_a_pending_transaction(cluster):
    app = LocalTransactions(on_execute={"pending": UNKNOW, "done": COMMIT}, on_check={"pending": UNKNOW})
    received = DeliveryCounts()
    producer = start_producer(cluster, app)
    try:
        producer.send_message_in_transaction(Message(TOPIC, b"done"))
        producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        assert wait_until(lambda: app.checks["pending"] >= 1)  # checked once (UNKNOW) before the restart
        cluster.restart_broker()
        app.on_check["pending"] = COMMIT
        consumer = cluster.push_consumer("tx-restart", TOPIC, received.listener, "tx-rc")
        try:
            assert wait_until(lambda: received.seen[b"pending"] == 1, timeout=30)
            assert not wait_until(lambda: received.seen.total() > 2, timeout=1.5)
        finally:
            consumer.shutdown()
    finally:
        producer.shutdown()
    assert received.seen == Counter({b"done": 1, b"pending": 1})


def test_operator_commits_a_pending_half_message_once(cluster):
    app = LocalTransactions(on_execute={"held": UNKNOW}, on_check={"held": UNKNOW})
    producer = start_producer(cluster, app)
    held = Message(TOPIC, b"held")
    # Not checked for a minute (RocketMQ's per-message immunity): the copy we name stays current.
    held.put_property("CHECK_IMMUNITY_TIME_IN_SECONDS", "60")
    try:
        result = producer.send_message_in_transaction(held)
    finally:
        producer.shutdown()  # nobody left to answer checks: an operator decides
    send = result.send_result
    _, commitlog_offset = decode_offset_msg_id(send.offset_msg_id)
    fields = {
        "producerGroup": "tx-group",
        "tranStateTableOffset": send.queue_offset,
        "commitLogOffset": commitlog_offset,
        "commitOrRollback": TRANSACTION_COMMIT_TYPE,
        "msgId": send.msg_id,
        "fromTransactionCheck": True,
    }
    wrong_group = cluster.request(RequestCode.END_TRANSACTION, {**fields, "producerGroup": "other"})
    assert wrong_group.code == ResponseCode.SYSTEM_ERROR and "producer group" in wrong_group.remark
    assert (
        cluster.request(RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": 3}).code
        == ResponseCode.SYSTEM_ERROR
    )
    assert cluster.max_offsets(TOPIC, 4) == 0
    assert cluster.request(RequestCode.END_TRANSACTION, fields).ok
    again = cluster.request(RequestCode.END_TRANSACTION, fields)
    assert again.code == ResponseCode.SYSTEM_ERROR and "already" in again.remark
    assert wait_until(lambda: cluster.max_offsets(TOPIC, 4) == 1)


def test_an_idle_producer_registers_again_with_a_broker_that_was_gone(cluster):
    """While the broker is down the name server has no route of the topic; the producer sends
    nothing after it returns, yet its periodic route poll finds the broker again, its heartbeat
    lists it there, and the pending transaction's check reaches it (RocketMQ's client polls every
    producer's publish topics, with or without a route)."""
    app = LocalTransactions(on_execute={"pending": UNKNOW}, on_check={"pending": UNKNOW})
    instance = MQClientInstance(
        cluster.namesrv_addr, "tx-idle", heartbeat_interval_ms=300, route_interval_ms=300
    )
    producer = TransactionProducer("tx-group", cluster.namesrv_addr, app, instance=instance).start()
    admin = MQAdmin(cluster.namesrv_addr)
    received = DeliveryCounts()
    try:
        producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        assert wait_until(lambda: app.checks["pending"] >= 1)
        assert cluster.broker.stop() == 0
        # A route poll while the broker is gone: the name server answers that the topic has none.
        assert wait_until(lambda: TOPIC not in instance.routes, timeout=10)
        app.on_check["pending"] = COMMIT
        cluster.start_broker()
        assert wait_until(lambda: listed(admin), timeout=15)
        consumer = cluster.push_consumer("tx-idle-c", TOPIC, received.listener, "tx-idle-c")
        try:
            assert wait_until(lambda: received.seen[b"pending"] == 1, timeout=30)
        finally:
            consumer.shutdown()
    finally:
        admin.close()
        producer.shutdown()


def listed(admin: MQAdmin) -> bool:
    """Does the broker list a connection of tx-group (mqadmin producerConnection)?"""
    try:
        return bool(admin.producer_connection("tx-group", TOPIC).connections)
    except MQError:  # no route yet, or the broker knows no such group
        return False
