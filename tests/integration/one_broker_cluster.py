"""A name server and one broker as real processes, with extra broker.conf lines, for the
filter / orderly / request-reply / trace integration tests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from broker.common.codes import RequestCode
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.harness import SMALL_STORE_CONF, EngineProcess, free_port, keep_draining

CLUSTER = "SemanticsCluster"


@dataclass
class OneBrokerCluster:
    namesrv: EngineProcess
    broker: EngineProcess
    admin: SyncRemotingClient

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    def create_topic(self, topic: str, queues: int) -> None:
        fields = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
        response = self.admin.invoke(
            self.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        )
        assert response.ok, response.remark
        self.wait_for_route(topic)

    def wait_for_route(self, topic: str, timeout: float = 15) -> None:
        # The broker re-registers with the name server a moment after the topic is created.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            if self.admin.invoke(self.namesrv_addr, request).ok:
                return
            time.sleep(0.05)
        raise AssertionError(f"no route of {topic} after {timeout} s")

    def stop(self) -> None:
        self.admin.close()
        self.broker.stop()
        self.namesrv.stop()


def start_one_broker(workdir: Path, extra_conf: str = "") -> OneBrokerCluster:
    namesrv = keep_draining(EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())]))
    conf = workdir / "broker.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName=broker-a\nbrokerId=0\n"
        f"storePathRootDir={workdir / 'store'}\n"
        "autoCreateTopicEnable=true\nautoCreateSubscriptionGroup=true\n"
        f"{SMALL_STORE_CONF}"
        f"registerBrokerIntervalMillis=500\n{extra_conf}"
    )
    try:
        args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv.addr]
        broker = keep_draining(EngineProcess(args))
    except BaseException:
        namesrv.stop()
        raise
    return OneBrokerCluster(namesrv, broker, SyncRemotingClient())
