"""The route model: what the name server writes is what every reader gets back, queue lists included."""

from broker.common.message_queue import MessageQueue
from broker.common.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from broker.common.topic_config import PERM_READ, PERM_WRITE

RW, WRITE_ONLY = PERM_READ | PERM_WRITE, PERM_WRITE


def _route() -> TopicRouteData:
    return TopicRouteData(
        "T",
        [
            QueueData("broker-a", 2, 2, RW),
            QueueData("broker-b", 1, 3, RW),
            QueueData("dlq-like", 2, 2, WRITE_ONLY),
        ],
        [
            BrokerData("c", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            BrokerData("c", "broker-b", {1: "10.0.0.3:10911"}),  # its master is down
            BrokerData("c", "dlq-like", {0: "10.0.0.4:10911"}),
        ],
    )


def test_a_route_reads_back_what_it_wrote():
    route = _route()
    assert TopicRouteData.from_json("T", route.to_json()) == route


def test_readable_queues_include_a_broker_set_without_master_and_skip_unreadable_ones():
    assert _route().readable_queues() == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
    ]


def test_writable_queues_need_a_master():
    assert _route().writable_queues() == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "dlq-like", 0),
        MessageQueue("T", "dlq-like", 1),
    ]


def test_a_store_host_names_its_broker_set_for_ipv4_and_ipv6():
    info = ClusterInfo(
        {
            "broker-a": BrokerData("c", "broker-a", {0: "127.0.0.1:10911"}),
            "broker-b": BrokerData("c", "broker-b", {0: "[::1]:10921", 1: "no-port"}),
        },
        {"c": ["broker-a", "broker-b"]},
    )
    assert info.broker_name_at(("127.0.0.1", 10911)) == "broker-a"
    assert info.broker_name_at(("::1", 10921)) == "broker-b"
    assert info.broker_name_at(("::1", 10911)) is None
    assert ClusterInfo.from_json(info.to_json()) == info


def test_a_cluster_the_name_server_does_not_know_has_no_brokers():
    assert ClusterInfo({}, {}).brokers_of("nope") == []
