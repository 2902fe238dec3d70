"""A producer follows its broker set's master by itself (real processes): its client polls the name
server once an hour here, so only the refresh a failed send asks for can tell it of the new master.

Broker ``broker-f``'s master stops and another broker takes over under the same brokerName on
another port; either nothing answers at the old address any more, or a SLAVE of the set does
there (it refuses writes with RocketMQ's SERVICE_NOT_AVAILABLE). Once the name server lists the
new master, the next send reaches it: the failed attempt refreshed the topic's route and the
retry went by it.
"""

import asyncio
import shutil
import threading
import time

from broker.client.admin import MQAdmin, NotFoundError
from broker.client.asyncio_api import AsyncProducer
from broker.client.instance import MQClientInstance
from broker.client.outgoing_message import send_header_and_body
from broker.client.producer import Producer
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.common.request_headers import CreateTopicRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.local_cluster import SMALL_STORE, free_port, write_conf
from tests.cluster import Cluster

TOPIC = "FailoverFollowed"
SET = "broker-f"
SETTINGS = {**SMALL_STORE, "registerBrokerIntervalMillis": 500, "autoCreateTopicEnable": "false"}
HOUR_MS = 3_600_000
SEND_TIMEOUT_MS = 15_000  # generous: the machine may be busy; nothing here waits for it to pass


def _create_topic(cluster: Cluster, addr: str) -> None:
    header = CreateTopicRequestHeader(TOPIC, AUTO_CREATE_TOPIC_KEY_TOPIC, 2, 2, 6, "SINGLE_TAG")
    response = cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header, addr=addr)
    assert response.ok, response.remark


def _wait_for_master(admin: MQAdmin, addr: str, timeout: float = 60) -> None:
    """Until the name server's route of TOPIC names ``addr`` the set's master, with its queues."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            route = admin.topic_route(TOPIC)
        except NotFoundError:
            route = None
        masters = {b.master_addr for b in route.broker_datas if b.broker_name == SET} if route else set()
        if route is not None and route.writable_queues() and masters == {addr}:
            return
        time.sleep(0.1)
    raise AssertionError(f"the name server never listed {addr} as {SET}'s master")


def _stored_on(cluster: Cluster, addr: str) -> int:
    total = 0
    for queue_id in range(2):
        response = cluster.request(
            RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": queue_id}, addr=addr
        )
        total += response.int_field("offset")
    return total


def _start_master_elsewhere(cluster: Cluster) -> str:
    """A new master of the set: its own port and store; the old one's topic created on it."""
    new = cluster.add_broker("broker-f-new", {**SETTINGS, "brokerName": SET})
    _create_topic(cluster, new.addr)
    return new.addr


def _producer(cluster: Cluster, name: str) -> Producer:
    instance = MQClientInstance(cluster.namesrv_addr, name, route_interval_ms=HOUR_MS)
    return Producer(f"{name}-group", cluster.namesrv_addr, instance=instance).start()


def _run(tmp_path, name: str, replace_old) -> None:
    cluster = Cluster(tmp_path, "FailoverCluster")
    admin = None
    try:
        old = cluster.add_broker(SET, SETTINGS)
        _create_topic(cluster, old.addr)
        admin = MQAdmin(cluster.namesrv_addr)
        _wait_for_master(admin, old.addr)
        producer = _producer(cluster, name)
        try:
            assert (
                producer.send(Message(TOPIC, b"before"), timeout_ms=SEND_TIMEOUT_MS).send_status == "SEND_OK"
            )
            assert producer.instance is not None  # started
            assert producer.instance.master_addrs[SET] == old.addr
            assert old.stop() == 0
            new_addr = replace_old(cluster, old)
            _wait_for_master(admin, new_addr)
            after = producer.send(Message(TOPIC, b"after"), timeout_ms=SEND_TIMEOUT_MS)
            assert after.send_status == "SEND_OK"
            assert producer.instance.master_addrs[SET] == new_addr
            assert _stored_on(cluster, new_addr) == 1
            for i in range(5):  # and it goes on there
                assert producer.send(Message(TOPIC, b"%d" % i)).send_status == "SEND_OK"
            assert _stored_on(cluster, new_addr) == 6
        finally:
            producer.shutdown()
    finally:
        if admin is not None:
            admin.close()
        cluster.stop()


def test_producer_follows_a_master_that_moved_to_another_port(tmp_path):
    """Nothing answers at the old master's address: the connection fails, the route is asked."""
    _run(tmp_path, "follower-gone", lambda cluster, old: _start_master_elsewhere(cluster))


def test_producer_leaves_an_address_where_a_slave_refuses_writes(tmp_path):
    """A slave of the set now listens at the old master's address and answers SERVICE_NOT_AVAILABLE
    ("message store is slave mode"): that answer, too, has the route asked."""

    def replace(cluster: Cluster, old) -> str:
        old_port = cluster.ports[SET]
        slave = {**SETTINGS, "brokerName": SET, "brokerId": 1, "brokerRole": "SLAVE"}
        slave_conf = {
            "brokerClusterName": cluster.cluster_name,
            "storePathRootDir": tmp_path / "broker-f-slave",
            "haListenPort": free_port(),
            **slave,
        }
        cluster.confs["broker-f-slave"] = write_conf(tmp_path / "broker-f-slave.conf", slave_conf)
        cluster.ports["broker-f-slave"] = old_port  # where the producer's stale route points
        # The set's topics, as its master's metadata would bring them (a slave refuses to create one).
        (tmp_path / "broker-f-slave" / "config").mkdir(parents=True)
        shutil.copy(tmp_path / SET / "config" / "topics.json", tmp_path / "broker-f-slave" / "config")
        refusing = cluster.start_broker("broker-f-slave")
        assert refusing.addr == old.addr
        header, body = send_header_and_body(Message(TOPIC, b"to a slave"), "direct", 4096, 2)
        header.queue_id = 0
        answer = cluster.request(RequestCode.SEND_MESSAGE, header, body, addr=refusing.addr)
        assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, answer.remark
        return _start_master_elsewhere(cluster)

    _run(tmp_path, "follower-refused", replace)


def test_asyncio_producer_follows_a_master_that_moved(tmp_path):
    """The same through the asyncio API (its producer runs on the caller's loop)."""
    cluster = Cluster(tmp_path, "FailoverCluster")
    admin = None
    try:
        old = cluster.add_broker(SET, SETTINGS)
        _create_topic(cluster, old.addr)
        admin = MQAdmin(cluster.namesrv_addr)
        _wait_for_master(admin, old.addr)
        moved = threading.Event()  # set once the new master is listed

        async def produce() -> list[str]:
            # The loop's shared instance, which the producer finds by itself, polling once an hour.
            loop = asyncio.get_running_loop()
            shared = MQClientInstance.shared(cluster.namesrv_addr, "follower-async", loop=loop)
            shared.intervals = (shared.intervals[0], HOUR_MS / 1000, shared.intervals[2])
            async with AsyncProducer(
                "follower-async-group", cluster.namesrv_addr, instance_name="follower-async"
            ) as producer:
                assert producer.producer.instance is shared
                before = await producer.send(Message(TOPIC, b"before"), timeout_ms=SEND_TIMEOUT_MS)
                await asyncio.to_thread(_move, cluster, old, admin, moved)
                after = await producer.send(Message(TOPIC, b"after"), timeout_ms=SEND_TIMEOUT_MS)
                return [before.send_status, after.send_status]

        assert asyncio.run(produce()) == ["SEND_OK", "SEND_OK"]
        assert moved.is_set() and _stored_on(cluster, cluster.brokers["broker-f-new"].addr) == 1
    finally:
        if admin is not None:
            admin.close()
        cluster.stop()


def _move(cluster: Cluster, old, admin: MQAdmin, moved: threading.Event) -> None:
    assert old.stop() == 0
    _wait_for_master(admin, _start_master_elsewhere(cluster))
    moved.set()
