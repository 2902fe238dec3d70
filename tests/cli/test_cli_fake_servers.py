"""Every mqadmin subcommand against scripted name server + two brokers (tests/cli/fake_server.py).

These pin the protocol the admin client speaks (request codes, header fields, which servers are
asked) and how answers become tables and JSON, independently of the real broker's behaviour.
"""

from __future__ import annotations

import json

import pytest

from broker.cli import main
from broker.client.admin import AsyncMQAdmin, NotFoundError
from broker.common.codes import RequestCode as RC
from tests.cli.fake_server import FakeServer, broker_config, encode_stored_message, error, ok, pulled

TOPIC = "OrderTopic"
GROUP = "OrderGroup"


@pytest.fixture
def servers():
    namesrv, broker_a, broker_b = FakeServer(), FakeServer(), FakeServer()
    brokers = {"broker-a": broker_a, "broker-b": broker_b}
    cluster: dict[str, dict] = {
        "brokerAddrTable": {
            name: {"cluster": "DefaultCluster", "brokerName": name, "brokerAddrs": {"0": srv.addr}}
            for name, srv in brokers.items()
        },
        "clusterAddrTable": {"DefaultCluster": list(brokers)},
    }
    route = {
        "queueDatas": [
            {"brokerName": n, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}
            for n in brokers
        ],
        "brokerDatas": list(cluster["brokerAddrTable"].values()),
    }
    namesrv.on(RC.GET_BROKER_CLUSTER_INFO, lambda ext, body: ok(json.dumps(cluster)))
    namesrv.on(
        RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        lambda ext, body: ok(json.dumps({"topicList": [TOPIC, "%RETRY%" + GROUP]})),
    )

    def route_of(ext, body):
        if ext["topic"] in (TOPIC, "%RETRY%" + GROUP):
            return ok(json.dumps(route))
        return error(17, f"No topic route info in name server for the topic: {ext['topic']}")

    namesrv.on(RC.GET_ROUTEINFO_BY_TOPIC, route_of)
    yield namesrv, brokers
    for srv in (namesrv, *brokers.values()):
        srv.close()


def mq_key(topic: str, broker: str, qid: int) -> str:
    # fastjson writes MessageQueue map keys as bare objects
    return json.dumps({"brokerName": broker, "queueId": qid, "topic": topic})


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cluster_list_table_and_json(servers, capsys):
    namesrv, brokers = servers
    for srv in brokers.values():
        srv.on(
            RC.GET_BROKER_RUNTIME_INFO,
            lambda ext, body: ok(
                json.dumps(
                    {
                        "table": {
                            "brokerVersionDesc": "V4_9_4",
                            "putTps": "12.5 10.0 9.0",
                            "getTransferredTps": "3.0 2 1",
                            "commitLogDiskRatio": "0.25",
                            "earliestMessageTimeStamp": "0",
                        }
                    }
                )
            ),
        )
    code, out, _ = run(capsys, "clusterList", "-n", namesrv.addr)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["#Cluster", "Name", "#Broker", "Name"]
    assert "broker-a" in lines[1] and "V4_9_4" in lines[1] and "12.50" in lines[1]
    code, out, _ = run(capsys, "clusterList", "-n", namesrv.addr, "--json")
    rows = json.loads(out)["brokers"]
    assert [(r["broker_name"], r["addr"], r["in_tps"]) for r in rows] == [
        ("broker-a", brokers["broker-a"].addr, 12.5),
        ("broker-b", brokers["broker-b"].addr, 12.5),
    ]


def test_update_topic_on_a_cluster_asks_every_master(servers, capsys):
    namesrv, brokers = servers
    for srv in brokers.values():
        srv.on(RC.UPDATE_AND_CREATE_TOPIC, lambda ext, body: ok())
    code, out, _ = run(
        capsys,
        "updateTopic",
        "-n",
        namesrv.addr,
        "-c",
        "DefaultCluster",
        "-t",
        "NewTopic",
        "-r",
        "3",
        "-w",
        "5",
        "-p",
        "4",
    )
    assert code == 0
    for srv in brokers.values():
        assert f"create topic to {srv.addr} success." in out
        sent = srv.received[-1].ext_fields
        assert (sent["topic"], sent["readQueueNums"], sent["writeQueueNums"], sent["perm"]) == (
            "NewTopic",
            "3",
            "5",
            "4",
        )
        assert sent["order"] == "false"


def test_broker_error_becomes_exit_1_with_code_name_and_remark(servers, capsys):
    namesrv, brokers = servers
    brokers["broker-a"].on(RC.UPDATE_AND_CREATE_TOPIC, lambda ext, body: error(16, "topic is read-only"))
    code, _, err = run(capsys, "updateTopic", "-n", namesrv.addr, "-b", brokers["broker-a"].addr, "-t", "X")
    assert code == 1
    assert err.strip() == (
        f"mqadmin: broker {brokers['broker-a'].addr} answered NO_PERMISSION (16): topic is read-only"
    )


def test_topic_route_and_missing_topic(servers, capsys):
    namesrv, _ = servers
    code, out, _ = run(capsys, "topicRoute", "-n", namesrv.addr, "-t", TOPIC)
    assert code == 0
    assert out.splitlines()[0].split() == [
        "#ClusterName",
        "#BrokerName",
        "#BrokerAddrs",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    assert out.splitlines()[-1].split() == ["Total:", "2", "4", "4"]
    data = json.loads(run(capsys, "topicRoute", "-n", namesrv.addr, "-t", TOPIC, "--json")[1])
    assert [q["write_queue_nums"] for q in data["queue_datas"]] == [2, 2]
    code, _, err = run(capsys, "topicRoute", "-n", namesrv.addr, "-t", "Nope")
    assert code == 1 and "no route for topic 'Nope'" in err


def test_topic_status_reads_stats_from_every_broker(servers, capsys):
    namesrv, brokers = servers
    for name, srv in brokers.items():
        table = ",".join(
            f'{mq_key(TOPIC, name, q)}:{{"minOffset":0,"maxOffset":{q + 5},'
            f'"lastUpdateTimestamp":1700000000000}}'
            for q in range(2)
        )
        srv.on(RC.GET_TOPIC_STATS_INFO, lambda ext, body, t=table: ok('{"offsetTable":{' + t + "}}"))
    code, out, _ = run(capsys, "topicStatus", "-n", namesrv.addr, "-t", TOPIC)
    assert code == 0
    rows = [line.split()[:4] for line in out.splitlines()[1:]]
    assert rows == [
        ["broker-a", "0", "0", "5"],
        ["broker-a", "1", "0", "6"],
        ["broker-b", "0", "0", "5"],
        ["broker-b", "1", "0", "6"],
    ]
    data = json.loads(run(capsys, "topicStatus", "-n", namesrv.addr, "-t", TOPIC, "--json")[1])
    assert data["queues"][1] == {
        "broker_name": "broker-a",
        "queue_id": 1,
        "min_offset": 0,
        "max_offset": 6,
        "last_update_timestamp": 1700000000000,
    }


def test_consumer_progress_sums_lag_across_brokers(servers, capsys):
    namesrv, brokers = servers
    for name, srv in brokers.items():
        table = f'{mq_key(TOPIC, name, 0)}:{{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":0}}'
        srv.on(
            RC.GET_CONSUME_STATS,
            lambda ext, body, t=table: ok('{"consumeTps":1.5,"offsetTable":{' + t + "}}"),
        )
    code, out, _ = run(capsys, "consumerProgress", "-n", namesrv.addr, "-g", GROUP)
    assert code == 0
    assert "#Broker Offset" in out and "Consume Diff Total: 12" in out and "Consume TPS: 3.00" in out
    data = json.loads(run(capsys, "consumerProgress", "-n", namesrv.addr, "-g", GROUP, "--json")[1])
    assert data["diff_total"] == 12
    assert [(q["broker_name"], q["diff"]) for q in data["queues"]] == [("broker-a", 6), ("broker-b", 6)]
    assert brokers["broker-a"].received[-1].ext_fields == {"consumerGroup": GROUP}


def test_consumer_and_producer_connections(servers, capsys):
    namesrv, brokers = servers
    conn = {
        "connectionSet": [
            {"clientId": "10.0.0.9@123", "clientAddr": "10.0.0.9:50000", "language": "PYTHON", "version": 401}
        ],
        "subscriptionTable": {TOPIC: {"topic": TOPIC, "subString": "TagA || TagB", "expressionType": "TAG"}},
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
    }
    brokers["broker-a"].on(RC.GET_CONSUMER_CONNECTION_LIST, lambda ext, body: ok(json.dumps(conn)))
    brokers["broker-a"].on(
        RC.GET_PRODUCER_CONNECTION_LIST,
        lambda ext, body: ok(json.dumps({"connectionSet": conn["connectionSet"]})),
    )
    code, out, _ = run(capsys, "consumerConnection", "-n", namesrv.addr, "-g", GROUP)
    assert code == 0
    assert "10.0.0.9@123" in out and "V4_9_4" in out and "TagA || TagB" in out
    assert "MessageModel: CLUSTERING" in out
    data = json.loads(
        run(capsys, "producerConnection", "-n", namesrv.addr, "-g", "P", "-t", TOPIC, "--json")[1]
    )
    assert data["connections"][0]["client_addr"] == "10.0.0.9:50000"
    brokers["broker-a"].handlers.clear()
    brokers["broker-b"].on(
        RC.GET_CONSUMER_CONNECTION_LIST, lambda ext, body: error(206, "the consumer group not online")
    )
    code, _, err = run(capsys, "consumerConnection", "-n", namesrv.addr, "-g", GROUP)
    assert code == 1 and "CONSUMER_NOT_ONLINE (206)" in err


def test_query_msg_by_offset_id_asks_the_store_host(servers, capsys):
    namesrv, brokers = servers
    srv = brokers["broker-b"]
    host, port = srv.addr.split(":")
    raw = encode_stored_message(
        topic=TOPIC,
        queue_id=1,
        queue_offset=7,
        physical_offset=4096,
        body=b"hello",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AB" * 16},
        store_host=(host, int(port)),
    )
    srv.on(RC.VIEW_MESSAGE_BY_ID, lambda ext, body: ok(raw))
    offset_id = (
        (bytes(map(int, host.split("."))) + int(port).to_bytes(4, "big") + (4096).to_bytes(8, "big"))
        .hex()
        .upper()
    )
    code, out, _ = run(capsys, "queryMsgById", "-n", namesrv.addr, "-i", offset_id)
    assert code == 0
    assert srv.received[-1].ext_fields == {"offset": "4096"}
    assert "Message Body:" in out and "hello" in out and "TagA" in out
    data = json.loads(run(capsys, "queryMsgById", "-n", namesrv.addr, "-i", offset_id, "--json")[1])
    message = data["messages"][0]
    assert (message["offset_msg_id"], message["msg_id"], message["queue_offset"]) == (offset_id, "AB" * 16, 7)
    assert message["keys"] == "k1 k2" and message["store_host"] == srv.addr


def test_query_by_key_and_unique_id_use_the_index_on_every_broker(servers, capsys):
    namesrv, brokers = servers
    host, port = brokers["broker-a"].addr.split(":")
    raw = encode_stored_message(
        topic=TOPIC,
        queue_id=0,
        queue_offset=3,
        physical_offset=100,
        body=b"x",
        properties={"KEYS": "order-1", "UNIQ_KEY": "CD" * 16},
        store_host=(host, int(port)),
    )
    brokers["broker-a"].on(RC.QUERY_MESSAGE, lambda ext, body: ok(raw, indexLastUpdateTimestamp=0))
    brokers["broker-b"].on(RC.QUERY_MESSAGE, lambda ext, body: error(22, "no message"))
    code, out, _ = run(capsys, "queryMsgByKey", "-n", namesrv.addr, "-t", TOPIC, "-k", "order-1")
    assert code == 0
    assert out.splitlines()[1].split() == ["CD" * 16, "0", "3"]
    assert {srv.received[-1].ext_fields["key"] for srv in brokers.values()} == {"order-1"}
    data = json.loads(
        run(capsys, "queryMsgById", "-n", namesrv.addr, "-t", TOPIC, "-i", "CD" * 16, "--json")[1]
    )
    assert data["messages"][0]["msg_id"] == "CD" * 16
    assert brokers["broker-a"].received[-1].ext_fields["_UNIQUE_KEY_QUERY"] == "true"
    assert (
        run(capsys, "queryMsgByKey", "-n", namesrv.addr, "-t", TOPIC, "-k", "other", "--json")[1]
        == '{"messages": []}\n'
    )


def test_reset_offset_by_time_online_and_offline(servers, capsys):
    namesrv, brokers = servers
    reset_body = '{"offsetTable":{' + mq_key(TOPIC, "broker-a", 0) + ":2}}"
    brokers["broker-a"].on(RC.INVOKE_BROKER_TO_RESET_OFFSET, lambda ext, body: ok(reset_body))
    # broker-b answers as Apache RocketMQ's brokers do for a group nobody consumes online
    # (CONSUMER_NOT_ONLINE): the tool searches by time and rewrites the committed offset itself. Our
    # brokers rewrite it themselves and never send this answer (tests/cli/test_cli_reset_live.py).
    brokers["broker-b"].on(RC.INVOKE_BROKER_TO_RESET_OFFSET, lambda ext, body: error(206, "not online"))
    stats = '{"offsetTable":{' + mq_key(TOPIC, "broker-b", 0) + ':{"brokerOffset":9,"consumerOffset":9}}}'
    brokers["broker-b"].on(RC.GET_CONSUME_STATS, lambda ext, body: ok(stats))
    brokers["broker-b"].on(RC.SEARCH_OFFSET_BY_TIMESTAMP, lambda ext, body: ok(offset=1))
    brokers["broker-b"].on(RC.UPDATE_CONSUMER_OFFSET, lambda ext, body: ok())
    code, out, _ = run(
        capsys, "resetOffsetByTime", "-n", namesrv.addr, "-g", GROUP, "-t", TOPIC, "-s", "1700000000000"
    )
    assert code == 0
    rows = [line.split() for line in out.splitlines()[2:]]
    assert rows == [["broker-a", "0", "2"], ["broker-b", "0", "1"]]
    sent = brokers["broker-a"].received[-1].ext_fields
    assert sent == {"topic": TOPIC, "group": GROUP, "timestamp": "1700000000000", "isForce": "true"}
    update = brokers["broker-b"].received[-1]
    assert update.code == RC.UPDATE_CONSUMER_OFFSET and update.ext_fields["commitOffset"] == "1"


def test_broker_status_and_config(servers, capsys):
    namesrv, brokers = servers
    config = {"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH"}
    srv = brokers["broker-a"]
    runtime = '{"table":{"putTps":"1.0","msgPutTotalTodayNow":"7"}}'
    srv.on(RC.GET_BROKER_RUNTIME_INFO, lambda ext, body: ok(runtime))
    srv.on(RC.GET_BROKER_CONFIG, lambda ext, body: broker_config(config))

    def update(ext, body):
        key, _, value = body.decode().strip().partition("=")
        config[key] = value
        return ok()

    srv.on(RC.UPDATE_BROKER_CONFIG, update)
    out = run(capsys, "brokerStatus", "-n", namesrv.addr, "-b", srv.addr)[1]
    assert "msgPutTotalTodayNow: 7" in out
    argv = ("updateBrokerConfig", "-b", srv.addr, "-k", "flushDiskType", "-v", "SYNC_FLUSH")
    assert run(capsys, *argv)[0] == 0
    data = json.loads(run(capsys, "getBrokerConfig", "-b", srv.addr, "--json")[1])
    assert data["brokers"][srv.addr]["flushDiskType"] == "SYNC_FLUSH"
    assert "flushDiskType = SYNC_FLUSH" in run(capsys, "getBrokerConfig", "-b", srv.addr)[1]


def test_sub_group_update_and_delete(servers, capsys):
    namesrv, brokers = servers
    for srv in brokers.values():
        srv.on(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, lambda ext, body: ok())
        srv.on(RC.DELETE_SUBSCRIPTIONGROUP, lambda ext, body: ok())
    code, out, _ = run(
        capsys,
        "updateSubGroup",
        "-n",
        namesrv.addr,
        "-c",
        "DefaultCluster",
        "-g",
        GROUP,
        "-r",
        "3",
        "-s",
        "false",
        "-d",
        "false",
    )
    assert code == 0
    assert out.count("create subscription group to") == 2 and "retryMaxTimes=3" in out
    sent = json.loads(brokers["broker-b"].received[-1].body)
    assert (
        sent["groupName"],
        sent["retryMaxTimes"],
        sent["consumeEnable"],
        sent["consumeBroadcastEnable"],
        sent["consumeFromMinEnable"],
    ) == (GROUP, 3, False, False, True)
    code, _, _ = run(
        capsys, "deleteSubGroup", "-n", namesrv.addr, "-b", brokers["broker-a"].addr, "-g", GROUP
    )
    assert code == 0 and brokers["broker-a"].received[-1].ext_fields["groupName"] == GROUP


def test_delete_topic_from_brokers_and_name_server(servers, capsys):
    namesrv, brokers = servers
    for srv in brokers.values():
        srv.on(RC.DELETE_TOPIC_IN_BROKER, lambda ext, body: ok())
    namesrv.on(RC.DELETE_TOPIC_IN_NAMESRV, lambda ext, body: ok())
    code, out, _ = run(capsys, "deleteTopic", "-n", namesrv.addr, "-t", TOPIC, "-c", "DefaultCluster")
    assert code == 0
    assert "delete topic [OrderTopic] from NameServer success." in out
    assert all(srv.received[-1].code == RC.DELETE_TOPIC_IN_BROKER for srv in brokers.values())
    assert namesrv.received[-1].ext_fields == {"topic": TOPIC, "clusterName": "DefaultCluster"}


def test_topic_list_plain_and_cluster_model(servers, capsys):
    namesrv, brokers = servers
    for srv in brokers.values():
        srv.on(RC.QUERY_TOPIC_CONSUME_BY_WHO, lambda ext, body: ok(json.dumps({"groupList": [GROUP]})))
    code, out, _ = run(capsys, "topicList", "-n", namesrv.addr)
    assert code == 0 and out.split() == ["%RETRY%" + GROUP, TOPIC]
    data = json.loads(run(capsys, "topicList", "-n", namesrv.addr, "-c", "--json")[1])
    assert {"cluster": ["DefaultCluster"], "topic": TOPIC, "consumer_groups": [GROUP]} in data["topics"]
    out = run(capsys, "topicList", "-n", namesrv.addr, "-c")[1]
    assert out.splitlines()[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]


def test_consumer_progress_of_every_group(servers, capsys):
    namesrv, brokers = servers
    table = f'{mq_key(TOPIC, "broker-a", 0)}:{{"brokerOffset":5,"consumerOffset":1,"lastTimestamp":0}}'
    brokers["broker-a"].on(
        RC.GET_CONSUME_STATS, lambda ext, body: ok('{"consumeTps":0,"offsetTable":{' + table + "}}")
    )
    brokers["broker-b"].on(RC.GET_CONSUME_STATS, lambda ext, body: ok('{"consumeTps":0,"offsetTable":{}}'))
    for srv in brokers.values():
        srv.on(RC.GET_CONSUMER_CONNECTION_LIST, lambda ext, body: error(206, "not online"))
    data = json.loads(run(capsys, "consumerProgress", "-n", namesrv.addr, "--json")[1])
    assert data["groups"] == [
        {
            "group": GROUP,
            "count": 0,
            "version": None,
            "consume_type": "",
            "message_model": "",
            "consume_tps": 0.0,
            "diff_total": 4,
        }
    ]
    out = run(capsys, "consumerProgress", "-n", namesrv.addr)[1]
    assert GROUP in out and "OFFLINE" in out


def test_send_message_to_a_chosen_queue(servers, capsys):
    namesrv, brokers = servers
    brokers["broker-b"].on(
        RC.SEND_MESSAGE, lambda ext, body: ok(msgId="0A" * 16, queueId=ext["queueId"], queueOffset=42)
    )
    code, out, _ = run(
        capsys,
        "sendMessage",
        "-n",
        namesrv.addr,
        "-t",
        TOPIC,
        "-p",
        "héllo",
        "-k",
        "k1",
        "-c",
        "TagA",
        "-b",
        "broker-b",
        "-i",
        "1",
    )
    assert code == 0
    # The producer also heartbeats the broker it discovered; pick the send itself.
    sent = next(r for r in reversed(brokers["broker-b"].received) if r.code == RC.SEND_MESSAGE)
    assert sent.body == "héllo".encode() and sent.ext_fields["queueId"] == "1"
    props = dict(p.split("\x01") for p in sent.ext_fields["properties"].split("\x02") if p)
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1" and len(props["UNIQ_KEY"]) == 32
    row = out.splitlines()[1].split()
    assert row[:4] == ["broker-b", "1", "42", "SEND_OK"] and row[4] == props["UNIQ_KEY"]
    code, _, err = run(
        capsys, "sendMessage", "-n", namesrv.addr, "-t", TOPIC, "-p", "x", "-b", "broker-b", "-i", "9"
    )
    assert code == 1 and "queue 9 does not exist" in err


def test_consume_message_pulls_each_queue_without_committing(servers, capsys):
    namesrv, brokers = servers
    srv = brokers["broker-a"]
    host, port = srv.addr.split(":")
    stored = [
        encode_stored_message(
            topic=TOPIC,
            queue_id=0,
            queue_offset=i,
            physical_offset=i * 200,
            body=f"m{i}".encode(),
            properties={"UNIQ_KEY": f"{i:032X}"},
            store_host=(host, int(port)),
        )
        for i in range(3)
    ]
    srv.on(RC.GET_MIN_OFFSET, lambda ext, body: ok(offset=0))
    srv.on(RC.GET_MAX_OFFSET, lambda ext, body: ok(offset=3 if ext["queueId"] == "0" else 0))

    def pull(ext, body):
        start = int(ext["queueOffset"])
        return pulled(b"".join(stored[start : start + 2]), min(start + 2, 3), 0, 3)

    srv.on(RC.PULL_MESSAGE, pull)
    data = json.loads(
        run(capsys, "consumeMessage", "-n", namesrv.addr, "-t", TOPIC, "-b", "broker-a", "--json")[1]
    )
    assert [(m["broker_name"], m["queue_id"], m["queue_offset"], m["body"]) for m in data["messages"]] == [
        ("broker-a", 0, 0, "m0"),
        ("broker-a", 0, 1, "m1"),
        ("broker-a", 0, 2, "m2"),
    ]
    pulls = [r.ext_fields for r in srv.received if r.code == RC.PULL_MESSAGE]
    assert all(p["commitOffset"] == "0" and p["suspendTimeoutMillis"] == "0" for p in pulls)
    out = run(
        capsys,
        "consumeMessage",
        "-n",
        namesrv.addr,
        "-t",
        TOPIC,
        "-b",
        "broker-a",
        "-i",
        "0",
        "-o",
        "1",
        "-c",
        "1",
    )[1]
    assert out.splitlines()[1].split()[:3] == ["broker-a", "0", "1"] and "1 message(s)" in out


async def test_async_core_serves_coroutines(servers):
    namesrv, brokers = servers
    async with AsyncMQAdmin(namesrv.addr) as admin:
        info = await admin.cluster_info()
        route = await admin.topic_route(TOPIC)
        with pytest.raises(NotFoundError, match="no route for topic 'Missing'"):
            await admin.topic_route("Missing")
    assert info.master_addrs("DefaultCluster") == [brokers["broker-a"].addr, brokers["broker-b"].addr]
    assert [q.write_queue_nums for q in route.queue_datas] == [2, 2]
