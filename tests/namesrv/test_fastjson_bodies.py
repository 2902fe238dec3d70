"""Every body the name server writes, read raw off the wire from a real name server process and
held to fastjson's rules as RocketMQ's name server writes them: no nulls, Long keys bare, the
Java classes' field names and types (tests/common/java_bodies.py)."""

import re

import orjson
import pytest

from broker.common.codes import RequestCode as RC
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.cluster import namesrv_fixture
from tests.common import java_bodies as java

MASTER, SLAVE = "127.0.0.1:20911", "127.0.0.1:20921"


namesrv = namesrv_fixture()


@pytest.fixture
def client():
    sync = SyncRemotingClient()
    yield sync
    sync.close()


def register(client, addr, broker_addr, broker_id, topics=("orders",)):
    body = {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {
                t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics
            },
            "dataVersion": {"timestamp": 1700000000000, "counter": 3},
        },
        "filterServerList": [],
    }
    header = {"brokerName": "broker-a", "brokerAddr": broker_addr, "clusterName": "c1", "haServerAddr": "",
              "brokerId": broker_id, "compressed": False}  # fmt: skip
    answer = client.invoke(addr, create_request(RC.REGISTER_BROKER, header, orjson.dumps(body)))
    assert answer.ok, answer.remark
    return answer


def ask(client, addr, code, fields=None, body=None):
    answer = client.invoke(addr, create_request(code, fields, body))
    assert answer.ok, answer.remark
    return answer.body


def test_route_of_a_topic_without_order_conf_has_no_null_and_bare_broker_ids(namesrv, client):
    register(client, namesrv.addr, MASTER, 0)
    register(client, namesrv.addr, SLAVE, 1)
    raw = ask(client, namesrv.addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})

    route = java.assert_fastjson_body(raw, java.with_optional(java.TOPIC_ROUTE_DATA, "orderTopicConf"))
    assert b"orderTopicConf" not in raw
    assert f'"brokerAddrs":{{0:"{MASTER}",1:"{SLAVE}"}}'.encode() in raw
    assert route["queueDatas"] == [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
    ]


def test_order_topic_conf_in_routes_and_registration_answers(namesrv, client):
    # No order-topic settings yet: RocketMQ's name server answers a registration with no body.
    assert not register(client, namesrv.addr, MASTER, 0).body

    fields = {"namespace": "ORDER_TOPIC_CONFIG", "key": "orders", "value": "broker-a:4"}
    ask(client, namesrv.addr, RC.PUT_KV_CONFIG, fields)
    route = ask(client, namesrv.addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})
    assert java.assert_fastjson_body(route, java.TOPIC_ROUTE_DATA)["orderTopicConf"] == "broker-a:4"

    answer = register(client, namesrv.addr, MASTER, 0).body
    assert java.assert_fastjson_body(answer, java.KV_TABLE) == {"table": {"orders": "broker-a:4"}}
    listed = ask(client, namesrv.addr, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    assert java.assert_fastjson_body(listed, java.KV_TABLE) == {"table": {"orders": "broker-a:4"}}


def test_cluster_info_keys_broker_ids_bare(namesrv, client):
    register(client, namesrv.addr, MASTER, 0)
    register(client, namesrv.addr, SLAVE, 1)
    raw = ask(client, namesrv.addr, RC.GET_BROKER_CLUSTER_INFO)

    info = java.assert_fastjson_body(raw, java.CLUSTER_INFO)
    assert f'"brokerAddrs":{{0:"{MASTER}",1:"{SLAVE}"}}'.encode() in raw
    assert info["clusterAddrTable"] == {"c1": ["broker-a"]}


def test_topic_lists_as_topic_list_bodies(namesrv, client):
    register(client, namesrv.addr, MASTER, 0, topics=("orders", "payments"))
    register(client, namesrv.addr, SLAVE, 1, topics=("orders", "payments"))
    plain = java.with_optional(java.TOPIC_LIST, "brokerAddr")

    every = java.assert_fastjson_body(ask(client, namesrv.addr, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), plain)
    assert every == {"topicList": ["orders", "payments"]}
    of_cluster = ask(client, namesrv.addr, RC.GET_TOPICS_BY_CLUSTER, {"cluster": "c1"})
    assert java.assert_fastjson_body(of_cluster, plain) == {"topicList": ["orders", "payments"]}
    # The system-topic list names the clusters and brokers and, as RocketMQ's, one broker to ask
    # for the broker's own system topics.
    system = ask(client, namesrv.addr, RC.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert java.assert_fastjson_body(system, java.TOPIC_LIST) == {
        "brokerAddr": MASTER,
        "topicList": ["broker-a", "c1"],
    }


def test_data_version_answer(namesrv, client):
    register(client, namesrv.addr, MASTER, 0)
    theirs = orjson.dumps({"timestamp": 1, "counter": 1})
    answer = client.invoke(
        namesrv.addr, create_request(RC.QUERY_DATA_VERSION, {"brokerAddr": MASTER, "brokerName": "broker-a",
                                                             "clusterName": "c1", "brokerId": 0}, theirs)
    )  # fmt: skip
    assert answer.ok and answer.ext_fields["changed"] in ("true", True)
    version = java.assert_fastjson_body(answer.body, java.DATA_VERSION)
    assert version == {"counter": 3, "timestamp": 1700000000000}
    assert re.fullmatch(rb'\{"counter":3,"timestamp":1700000000000\}', answer.body)
