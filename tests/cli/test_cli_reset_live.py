"""mqadmin resetOffsetByTime for a group with no consumer online, against a real name server and two
real brokers: what the brokers answer and the offsets they then hold, read back from them.

Our brokers rewrite an offline group's offsets themselves and answer with the new table, where
Apache RocketMQ's answer CONSUMER_NOT_ONLINE and leave the rewrite to the tool (that fallback is
pinned against a scripted broker in test_cli_fake_servers.py, the only place the answer occurs).
"""

from __future__ import annotations

import contextlib
import io
import json
import time

import pytest

from broker.cli import main
from broker.client.admin import MQAdmin
from broker.client.producer import Producer
from broker.common.message import Message
from tests.cluster import CLI, start
from tests.cluster import CLI_CLUSTER as CLUSTER

TOPIC, GROUP = "CliResetTopic", "CliResetOfflineGroup"
MESSAGES = 6  # over queue 0 of both brokers, at least 2 on each


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    live = start(CLI, tmp_path_factory.mktemp("cli-reset"))
    try:
        with MQAdmin(live.namesrv_addr) as admin:
            for addr in admin.resolve_masters(None, CLUSTER):
                admin.create_or_update_topic(addr, TOPIC, 1, 1)
            deadline = time.monotonic() + 20
            while len(admin.topic_route(TOPIC).queue_datas) < 2:
                assert time.monotonic() < deadline, "the topic's route never listed both brokers"
                time.sleep(0.05)
        producer = Producer("cli-reset-producer", live.namesrv_addr).start()
        try:
            for i in range(MESSAGES):
                producer.send(Message(TOPIC, f"body-{i}".encode()))
        finally:
            producer.shutdown()
        yield live
    finally:
        live.stop()


def mqadmin_json(*argv: str) -> tuple[int, dict | None, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json"])
    return code, json.loads(out.getvalue()) if code == 0 else None, err.getvalue()


def committed(admin: MQAdmin, cluster) -> dict[str, int]:
    """The offset each broker holds for the group's queue 0 (asked of the broker itself)."""
    return {
        name: admin.query_consumer_offset(broker.addr, GROUP, TOPIC, 0)
        for name, broker in cluster.brokers.items()
    }


@pytest.fixture
def group_at_offset_1(cluster):
    """The offline group has read one message of each broker's queue 0."""
    with MQAdmin(cluster.namesrv_addr) as admin:
        ends = {q.broker_name: q.max_offset for q in admin.topic_status(TOPIC).queues}
        assert sum(ends.values()) == MESSAGES and min(ends.values()) >= 2, ends
        for broker in cluster.brokers.values():
            admin.update_consumer_offset(broker.addr, GROUP, TOPIC, 0, 1)
        assert committed(admin, cluster) == {"broker-a": 1, "broker-b": 1}
        yield admin, ends


def reset(cluster, timestamp: str, force: str) -> dict:
    code, data, err = mqadmin_json(
        "resetOffsetByTime",
        "-n",
        cluster.namesrv_addr,
        "-g",
        GROUP,
        "-t",
        TOPIC,
        "-s",
        timestamp,
        "-f",
        force,
    )
    assert code == 0 and data is not None, err
    return {(e["broker_name"], e["queue_id"]): e["offset"] for e in data["offsets"]}


def test_a_forced_reset_to_now_skips_the_backlog(cluster, group_at_offset_1):
    admin, ends = group_at_offset_1
    future = str(int(time.time() * 1000) + 3_600_000)
    assert reset(cluster, future, "true") == {(name, 0): end for name, end in ends.items()}
    assert committed(admin, cluster) == ends


def test_a_reset_back_in_time_replays(cluster, group_at_offset_1):
    admin, _ = group_at_offset_1
    assert reset(cluster, "0", "false") == {("broker-a", 0): 0, ("broker-b", 0): 0}
    assert committed(admin, cluster) == {"broker-a": 0, "broker-b": 0}


def test_an_unforced_reset_never_moves_an_offset_forward(cluster, group_at_offset_1):
    """-f false: "only back". A time after every message would skip the unread messages; the
    brokers keep offset 1 and say so."""
    admin, _ = group_at_offset_1
    future = str(int(time.time() * 1000) + 3_600_000)
    assert reset(cluster, future, "false") == {("broker-a", 0): 1, ("broker-b", 0): 1}
    assert committed(admin, cluster) == {"broker-a": 1, "broker-b": 1}


def test_a_reset_on_a_topic_nobody_has_is_refused_with_the_reason(cluster, capsys):
    code = main(
        ["resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", GROUP, "-t", "NoSuchResetTopic", "-s", "0"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "no route for topic 'NoSuchResetTopic' on the name server" in err
