"""mqadmin against the real name server process, with scripted brokers registered in it.

Pins compatibility with the name server's actual JSON (cluster info, routes, topic lists) and
its delete path, while the brokers stay scripted (tests/cli/fake_server.py).
"""

from __future__ import annotations

import json

import orjson
import pytest

from broker.cli import main
from broker.common.codes import RequestCode as RC
from broker.local_cluster import start_namesrv
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.cli.fake_server import FakeServer, ok

TOPIC = "RealNsTopic"
DOOMED = "RealNsDoomed"  # deleted by a test; the others keep TOPIC whatever the order


def register(client: SyncRemotingClient, namesrv: str, name: str, addr: str, topics: dict[str, int]) -> None:
    body = {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {
                t: {"topicName": t, "readQueueNums": n, "writeQueueNums": n, "perm": 6}
                for t, n in topics.items()
            },
            "dataVersion": {"timestamp": 1, "counter": 1},
        },
        "filterServerList": [],
    }
    header = {"brokerName": name, "brokerAddr": addr, "clusterName": "RealCluster", "haServerAddr": "",
              "brokerId": 0, "compressed": False}  # fmt: skip
    reply = client.invoke(namesrv, create_request(RC.REGISTER_BROKER, header, orjson.dumps(body)))
    assert reply.ok, reply.remark


@pytest.fixture(scope="module")
def setup():
    namesrv = start_namesrv()
    brokers = {"broker-a": FakeServer(), "broker-b": FakeServer()}
    # The name server forgets a broker whose connection closes, so this client stays open.
    client = SyncRemotingClient()
    for name, srv in brokers.items():
        register(client, namesrv.addr, name, srv.addr, {TOPIC: 2 if name == "broker-a" else 3, DOOMED: 1})
        srv.on(RC.GET_BROKER_RUNTIME_INFO, lambda ext, body: ok('{"table":{"brokerVersionDesc":"V4_9_4"}}'))
        srv.on(RC.DELETE_TOPIC_IN_BROKER, lambda ext, body: ok())
    yield namesrv, brokers
    client.close()
    for srv in brokers.values():
        srv.close()
    namesrv.stop()


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_cluster_list_from_the_real_name_server(setup, capsys):
    namesrv, brokers = setup
    rows = run_json(capsys, "clusterList", "-n", namesrv.addr)["brokers"]
    assert [(r["cluster"], r["broker_name"], r["broker_id"], r["addr"], r["version"]) for r in rows] == [
        ("RealCluster", name, 0, srv.addr, "V4_9_4") for name, srv in sorted(brokers.items())
    ]


def test_topic_list_and_route_from_the_real_name_server(setup, capsys):
    namesrv, brokers = setup
    assert TOPIC in run_json(capsys, "topicList", "-n", namesrv.addr)["topics"]
    route = run_json(capsys, "topicRoute", "-n", namesrv.addr, "-t", TOPIC)
    assert [(q["broker_name"], q["read_queue_nums"]) for q in route["queue_datas"]] == [
        ("broker-a", 2),
        ("broker-b", 3),
    ]
    assert {b["broker_name"]: b["broker_addrs"] for b in route["broker_datas"]} == {
        name: {"0": srv.addr} for name, srv in brokers.items()
    }


def test_delete_topic_reaches_brokers_and_the_real_name_server(setup, capsys):
    namesrv, brokers = setup
    data = run_json(capsys, "deleteTopic", "-n", namesrv.addr, "-t", DOOMED, "-c", "RealCluster")
    assert sorted(data["brokers"]) == sorted(srv.addr for srv in brokers.values())
    assert DOOMED not in run_json(capsys, "topicList", "-n", namesrv.addr)["topics"]
    assert main(["topicRoute", "-n", namesrv.addr, "-t", DOOMED]) == 1
    assert "no route for topic" in capsys.readouterr().err
