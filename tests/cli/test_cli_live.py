"""mqadmin against a real name server and two brokers (subprocesses, tests/cli/live_cluster.py).

Subcommands run in-process through ``broker.cli.main`` (fast) and a few as real subprocesses
(``python -m broker.cli``). The tests share one cluster; what several need (the topic, the
messages sent to it) comes from module fixtures, so each test also runs alone (``-k``).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.cli import main
from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
from broker.client.admin import MQAdmin
from broker.client.producer import Producer
from broker.client.pull_consumer import LitePullConsumer
from broker.client.push_consumer import ConsumeConcurrentlyStatus
from tests.cluster import CLI, cluster_fixture, send
from tests.cluster import CLI_CLUSTER as CLUSTER

TOPIC = "CliLiveTopic"
GROUP = "CliLiveGroup"
MESSAGES = 6


cluster = cluster_fixture(CLI)


@pytest.fixture(scope="module")
def topic(cluster) -> str:
    """TOPIC with 3 queues on each broker, in the name server's route."""
    n = cluster.namesrv_addr
    quiet("updateTopic", "-n", n, "-c", CLUSTER, "-t", TOPIC, "-r", "3", "-w", "3")
    eventually(lambda: len(quiet_json("topicRoute", "-n", n, "-t", TOPIC)["queue_datas"]) == 2)
    return TOPIC


@pytest.fixture(scope="module")
def sent(cluster, topic) -> dict[str, Any]:
    """MESSAGES messages sent by ``mqadmin sendMessage`` to queue 0 of each broker in turn,
    key ``key-<i>``, body ``body-<i>``, tag TagA: their results, and a time before them."""
    since = int(time.time() * 1000) - 60_000
    results = []
    for i in range(MESSAGES):
        broker = "broker-a" if i % 2 == 0 else "broker-b"
        message = ["-t", topic, "-p", f"body-{i}", "-k", f"key-{i}", "-c", "TagA"]
        results.append(
            quiet_json("sendMessage", "-n", cluster.namesrv_addr, *message, "-b", broker, "-i", "0")
        )
    return {"results": results, "since": since}


def quiet(*argv: str) -> str:
    """mqadmin's output, for fixtures (capsys is a test's own)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, f"mqadmin {' '.join(argv)} exited {code}: {err.getvalue()}"
    return out.getvalue()


def quiet_json(*argv: str) -> Any:
    return json.loads(quiet(*argv, "--json"))


def mqadmin(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def ok(capsys, *argv: str) -> str:
    code, out, err = mqadmin(capsys, *argv)
    assert code == 0, f"mqadmin {' '.join(argv)} exited {code}: {err}"
    return out


def ok_json(capsys, *argv: str) -> Any:
    return json.loads(ok(capsys, *argv, "--json"))


def eventually(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Retry until ``check`` returns something truthy: registration and indexing are async."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.3)


def test_cluster_list_shows_both_brokers(cluster, capsys):
    n = cluster.namesrv_addr

    def both_registered():
        rows = ok_json(capsys, "clusterList", "-n", n)["brokers"]
        return rows if len(rows) == 2 else None

    rows = eventually(both_registered)
    assert {(r["cluster"], r["broker_name"], r["broker_id"]) for r in rows} == {
        (CLUSTER, "broker-a", 0),
        (CLUSTER, "broker-b", 0),
    }
    assert {r["addr"] for r in rows} == {p.addr for p in cluster.brokers.values()}
    text = ok(capsys, "clusterList", "-n", n)
    assert text.splitlines()[0].startswith("#Cluster Name")
    assert "broker-a" in text and "broker-b" in text


def test_update_topic_then_list_and_route(cluster, capsys):
    n = cluster.namesrv_addr
    out = ok(capsys, "updateTopic", "-n", n, "-c", CLUSTER, "-t", TOPIC, "-r", "3", "-w", "3")
    assert out.count("create topic to") == 2
    eventually(lambda: TOPIC in ok_json(capsys, "topicList", "-n", n)["topics"])
    assert TOPIC in ok(capsys, "topicList", "-n", n).split()

    def full_route():
        route = ok_json(capsys, "topicRoute", "-n", n, "-t", TOPIC)
        return route if len(route["queue_datas"]) == 2 else None

    route = eventually(full_route)
    assert {
        (q["broker_name"], q["read_queue_nums"], q["write_queue_nums"], q["perm"])
        for q in route["queue_datas"]
    } == {("broker-a", 3, 3, 6), ("broker-b", 3, 3, 6)}
    table = ok(capsys, "topicRoute", "-n", n, "-t", TOPIC)
    assert table.splitlines()[-1].split() == ["Total:", "2", "6", "6"]


def test_send_messages_then_topic_status(cluster, capsys, sent):
    n = cluster.namesrv_addr
    results = sent["results"]
    assert all(r["send_status"] == "SEND_OK" for r in results)
    assert len({r["msg_id"] for r in results}) == MESSAGES
    status = ok_json(capsys, "topicStatus", "-n", n, "-t", TOPIC)
    maxima = {(q["broker_name"], q["queue_id"]): q["max_offset"] for q in status["queues"]}
    assert maxima[("broker-a", 0)] == maxima[("broker-b", 0)] == MESSAGES // 2
    assert len(maxima) == 6
    table = ok(capsys, "topicStatus", "-n", n, "-t", TOPIC)
    assert table.splitlines()[0].split()[:3] == ["#Broker", "Name", "#QID"]


def test_query_messages_by_ids_and_key(cluster, capsys, sent):
    n = cluster.namesrv_addr
    first = sent["results"][0]
    by_offset_id = ok_json(capsys, "queryMsgById", "-n", n, "-i", first["offset_msg_id"])["messages"]
    assert by_offset_id[0]["body"] == "body-0" and by_offset_id[0]["msg_id"] == first["msg_id"]
    assert "Message Body:" in ok(capsys, "queryMsgById", "-n", n, "-i", first["offset_msg_id"])

    def by_unique_id():
        return ok_json(capsys, "queryMsgById", "-n", n, "-t", TOPIC, "-i", first["msg_id"])["messages"]

    assert eventually(by_unique_id)[0]["body"] == "body-0"

    def by_key():
        return ok_json(capsys, "queryMsgByKey", "-n", n, "-t", TOPIC, "-k", "key-3")["messages"]

    found = eventually(by_key)
    assert [m["body"] for m in found] == ["body-3"]
    table = ok(capsys, "queryMsgByKey", "-n", n, "-t", TOPIC, "-k", "key-3")
    assert table.splitlines()[1].split()[0] == sent["results"][3]["msg_id"]


def test_consume_message_prints_what_was_sent(cluster, capsys, sent):
    n = cluster.namesrv_addr
    data = ok_json(capsys, "consumeMessage", "-n", n, "-t", TOPIC)
    assert sorted(m["body"] for m in data["messages"]) == sorted(f"body-{i}" for i in range(MESSAGES))
    text = ok(
        capsys, "consumeMessage", "-n", n, "-t", TOPIC, "-b", "broker-b", "-i", "0", "-o", "1", "-c", "1"
    )
    assert "body-3" in text and "1 message(s)" in text


def test_sub_group_progress_and_reset(cluster, capsys, sent):
    n = cluster.namesrv_addr
    out = ok(capsys, "updateSubGroup", "-n", n, "-c", CLUSTER, "-g", GROUP, "-r", "5")
    assert out.count("create subscription group to") == 2
    with MQAdmin(n) as admin:  # a consumer that read one message on each broker's queue 0
        for broker in cluster.brokers.values():
            admin.update_consumer_offset(broker.addr, GROUP, TOPIC, 0, 1)
    progress = ok_json(capsys, "consumerProgress", "-n", n, "-g", GROUP, "-t", TOPIC)
    lag = {(q["broker_name"], q["queue_id"]): (q["consumer_offset"], q["diff"]) for q in progress["queues"]}
    assert lag[("broker-a", 0)] == lag[("broker-b", 0)] == (1, MESSAGES // 2 - 1)
    assert progress["diff_total"] == MESSAGES - 2
    assert "Consume Diff Total" in ok(capsys, "consumerProgress", "-n", n, "-g", GROUP, "-t", TOPIC)
    reset = ok_json(capsys, "resetOffsetByTime", "-n", n, "-g", GROUP, "-t", TOPIC, "-s", str(sent["since"]))
    assert {(e["broker_name"], e["queue_id"], e["offset"]) for e in reset["offsets"]} >= {
        ("broker-a", 0, 0),
        ("broker-b", 0, 0),
    }
    after = ok_json(capsys, "consumerProgress", "-n", n, "-g", GROUP, "-t", TOPIC)
    assert after["diff_total"] == MESSAGES
    groups = ok_json(capsys, "topicList", "-n", n, "-c")["topics"]
    assert GROUP in next(t["consumer_groups"] for t in groups if t["topic"] == TOPIC)


def test_a_slow_consumers_progress_shows_the_tps_of_its_committed_offsets(cluster, capsys):
    """A consumer that fetched its whole backlog at once and works through it one message per
    100 ms: the consume TPS is what its committed offsets advance by, not 0 for want of pulls."""
    n, topic, group = cluster.namesrv_addr, "CliSlowTopic", "CliSlowGroup"
    quiet("updateTopic", "-n", n, "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    eventually(lambda: len(quiet_json("topicRoute", "-n", n, "-t", topic)["queue_datas"]) == 2)
    send(n, topic, 400)
    consumer = PushConsumer(
        group, n, consume_threads=1, consume_from_where=CONSUME_FROM_FIRST_OFFSET, persist_interval_ms=200
    )
    consumer.subscribe(topic, "*")

    def slow_listener(messages, context):
        time.sleep(0.1 * len(messages))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(slow_listener)
    with MQAdmin(n) as admin:

        def committed() -> int:
            return sum(
                max(0, admin.query_consumer_offset(broker.addr, group, topic, 0))
                for broker in cluster.brokers.values()
            )

        consumer.start()
        try:
            eventually(committed)  # past the first offsets (where it starts: not progress)
            began, first = time.monotonic(), committed()

            def tps() -> float:
                return ok_json(capsys, "consumerProgress", "-n", n, "-g", group, "-t", topic)["consume_tps"]

            readings: list[tuple[float, float, float]] = []  # (reported, true rate, elapsed)

            def converged() -> bool:
                """The broker's figure once its window holds only consuming: a first reading
                may still count the seconds before the consumer's first commit."""
                reported = tps()
                elapsed = time.monotonic() - began
                readings.append((reported, (committed() - first) / elapsed, elapsed))
                return reported > 0 and reported == pytest.approx(readings[-1][1], rel=0.5)

            eventually(converged, timeout=40)
        finally:
            consumer.shutdown()
    reported, true_rate, elapsed = readings[-1]
    # One message per 100 ms at most, on one thread; the committed offsets trail the work by up to
    # one persist interval (200 ms), which the first reading may owe to the window.
    assert 0 < true_rate <= 10 * (elapsed + 0.2) / elapsed
    assert reported == pytest.approx(true_rate, rel=0.5)


def test_connections_of_offline_groups_fail_clearly(cluster, capsys):
    code, _, err = mqadmin(capsys, "consumerConnection", "-n", cluster.namesrv_addr, "-g", GROUP)
    assert code == 1 and err.startswith("mqadmin: broker ")


def test_producer_connection_lists_a_live_producer(cluster, capsys, topic):
    n = cluster.namesrv_addr
    producer = Producer("CliLiveProducers", n).start()
    try:
        # The topic's route, as a send would fetch it, without a message the other tests would count.
        assert producer.instance is not None  # started
        producer.instance.run(producer.instance.route(TOPIC, refresh=True))
        # The SDK's first periodic heartbeat comes 30 s after start; send one now.
        producer.instance.run(producer.instance.send_heartbeats())

        def listed():
            return ok_json(capsys, "producerConnection", "-n", n, "-g", "CliLiveProducers", "-t", TOPIC)[
                "connections"
            ]

        connections = eventually(listed)
        assert connections[0]["language"] == "PYTHON" and connections[0]["client_id"]
        table = ok(capsys, "producerConnection", "-n", n, "-g", "CliLiveProducers", "-t", TOPIC)
        assert table.splitlines()[1].startswith("0001")
    finally:
        producer.shutdown()


def test_consumer_connection_lists_a_live_consumer(cluster, capsys, topic):
    n = cluster.namesrv_addr
    consumer = LitePullConsumer("CliLiveConsumers", n)
    consumer.subscribe(TOPIC, "TagA || TagB")
    consumer.start()
    try:
        assert consumer.instance is not None  # started
        consumer.instance.run(consumer.instance.route(TOPIC, refresh=True))
        consumer.instance.run(consumer.instance.send_heartbeats())  # instead of waiting 30 s

        def listed():
            return ok_json(capsys, "consumerConnection", "-n", n, "-g", "CliLiveConsumers")

        conn = eventually(listed)
        assert conn["connections"][0]["language"] == "PYTHON"
        assert conn["subscriptions"] == [
            {"topic": TOPIC, "sub_string": "TagA || TagB", "expression_type": "TAG"}
        ]
        assert conn["message_model"] == "CLUSTERING"
        text = ok(capsys, "consumerConnection", "-n", n, "-g", "CliLiveConsumers")
        assert "Below is subscription:" in text and "MessageModel: CLUSTERING" in text
    finally:
        consumer.shutdown()


def test_broker_status_and_config(cluster, capsys, sent):
    addr = cluster.brokers["broker-a"].addr
    status = ok_json(capsys, "brokerStatus", "-b", addr)["brokers"][addr]
    assert status, "runtime info is empty"
    # Figures clusterList and the console's cluster page show (#SPACE, #Hour): the disk is in
    # use and the messages sent earlier in this module are the oldest, stored moments ago.
    assert 0 < float(status["commitLogDiskRatio"]) <= 1
    assert status["commitLogDirCapacity"].startswith("Total : ")
    assert 0 < time.time() * 1000 - int(status["earliestMessageTimeStamp"]) < 600_000
    rows = ok_json(capsys, "clusterList", "-n", cluster.namesrv_addr)["brokers"]
    assert all(0 < row["disk_ratio"] <= 1 for row in rows), rows
    # -m: messages in and out yesterday and today; until a midnight passes, today is all of them.
    table = ok(capsys, "clusterList", "-n", cluster.namesrv_addr, "-m")
    daily_columns = ["#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]
    assert table.splitlines()[0].split()[4:] == daily_columns
    put = sum(row["in_total_today"] + row["in_total_yesterday"] for row in rows)
    assert put >= len(sent["results"]), rows
    assert ":" in ok(capsys, "brokerStatus", "-n", cluster.namesrv_addr, "-c", CLUSTER)
    config = ok_json(capsys, "getBrokerConfig", "-b", addr)["brokers"][addr]
    assert config["brokerName"] == "broker-a"
    ok(capsys, "updateBrokerConfig", "-b", addr, "-k", "maxMessageSize", "-v", "1048576")
    assert ok_json(capsys, "getBrokerConfig", "-b", addr)["brokers"][addr]["maxMessageSize"] == "1048576"
    assert "maxMessageSize" in ok(capsys, "getBrokerConfig", "-n", cluster.namesrv_addr, "-c", CLUSTER)


def test_delete_group_and_topic(cluster, capsys):
    # A group and topic of its own: deleting the module's would take them from the tests after it.
    n, group, topic = cluster.namesrv_addr, "CliLiveDoomedGroup", "CliLiveDoomedTopic"
    quiet("updateSubGroup", "-n", n, "-c", CLUSTER, "-g", group)
    quiet("updateTopic", "-n", n, "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    eventually(lambda: len(quiet_json("topicRoute", "-n", n, "-t", topic)["queue_datas"]) == 2)
    out = ok(capsys, "deleteSubGroup", "-n", n, "-c", CLUSTER, "-g", group)
    assert out.count("delete subscription group") == 2
    out = ok(capsys, "deleteTopic", "-n", n, "-c", CLUSTER, "-t", topic)
    assert "from NameServer success" in out
    assert topic not in ok_json(capsys, "topicList", "-n", n)["topics"]
    code, _, err = mqadmin(capsys, "topicRoute", "-n", n, "-t", topic)
    assert code == 1 and "no route" in err


def test_as_a_subprocess(cluster):
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli", "clusterList", "-n", cluster.namesrv_addr, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["brokers"]) == 2
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli", "updateTopic", "-n", cluster.namesrv_addr, "-t", "X"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "-b" in proc.stderr
