"""A real name server and two brokers (broker-a, broker-b) on free loopback ports, with a
topic of 4 queues on each, for the client acceptance tests."""

from __future__ import annotations

import time

import pytest

from broker.remoting.client import SyncRemotingClient
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from tests.harness import EngineProcess, free_port

TOPIC = "Acceptance"
# Short client periods keep the suite quick; RocketMQ's own defaults are 30 s / 30 s / 20 s / 5 s.
FAST_CLIENT = {
    "poll_name_server_interval_ms": 1000,
    "heartbeat_broker_interval_ms": 1000,
    "rebalance_interval_ms": 1000,
    "persist_consumer_offset_interval_ms": 500,
}


def wait_until(predicate, timeout: float = 60, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class Cluster:
    def __init__(self, base) -> None:
        self.base = base
        self.namesrv = EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())])
        self.ports = {"broker-a": free_port(), "broker-b": free_port()}
        self.brokers = {name: self.start_broker(name) for name in self.ports}

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def start_broker(self, name: str) -> EngineProcess:
        conf = self.base / f"{name}.conf"
        conf.write_text(
            f"brokerClusterName=AcceptCluster\nbrokerName={name}\nlistenPort={self.ports[name]}\n"
            f"namesrvAddr={self.namesrv.addr}\nstorePathRootDir={self.base / name}\n"
            "registerBrokerIntervalMillis=1000\nflushConsumerOffsetInterval=500\n"
        )
        return EngineProcess(["-m", "broker.server", "-c", str(conf)])

    def restart_broker(self, name: str) -> None:
        assert self.brokers[name].stop() == 0
        self.brokers[name] = self.start_broker(name)

    def create_topic(self, topic: str, queues: int = 4, brokers=None) -> None:
        admin = SyncRemotingClient()
        try:
            for name in brokers or self.brokers:
                fields = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
                request = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
                assert admin.invoke(self.brokers[name].addr, request).ok
        finally:
            admin.close()
        assert wait_until(lambda: self.route_has(topic, brokers or self.brokers), timeout=15)

    def route_has(self, topic: str, brokers) -> bool:
        admin = SyncRemotingClient()
        try:
            request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            response = admin.invoke(self.namesrv.addr, request)
            return response.ok and all(name.encode() in response.body for name in brokers)
        finally:
            admin.close()

    def stop(self) -> None:
        for process in self.brokers.values():
            process.stop()
        self.namesrv.stop()


@pytest.fixture
def cluster(tmp_path):
    state = Cluster(tmp_path)
    try:
        state.create_topic(TOPIC)
        yield state
    finally:
        state.stop()
