"""One name server and one broker as real processes, with broker settings chosen per test.

``SemanticsCluster`` (delay, retry and transaction tests) can restart its broker on the same port
and store; ``start_one_broker`` (filter / orderly / request-reply / trace tests) takes extra
broker.conf lines. Both files of the same name were merged here when their branches met."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
from broker.client.instance import MQClientInstance
from broker.remoting.client import SyncRemotingClient
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from tests.harness import EngineProcess, free_port

CLUSTER = "SemanticsCluster"
# Small store files: the defaults (1 GiB commit-log files, a 420 MB index) would fill the disk
# shared by everyone's test runs.
SMALL_STORE = (
    "mappedFileSizeCommitLog=8388608\nmappedFileSizeConsumeQueue=120000\n"
    "maxHashSlotNum=20000\nmaxIndexNum=80000\n"
)
BROKER_NAME = "broker-s"


def wait_until(predicate, timeout: float = 30, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _drain(process: EngineProcess) -> EngineProcess:
    def pump() -> None:
        for line in process.proc.stdout:
            process.output.append(line)

    threading.Thread(target=pump, daemon=True).start()
    return process


class SemanticsCluster:
    def __init__(self, workdir: Path, settings: dict[str, str]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.conf = workdir / "broker.conf"
        lines = {
            "brokerClusterName": CLUSTER,
            "brokerName": BROKER_NAME,
            "brokerId": "0",
            "storePathRootDir": str(workdir / "store"),
            "registerBrokerIntervalMillis": "1000",
            "flushConsumerOffsetInterval": "500",
            **settings,
        }
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.namesrv = _drain(EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())]))
        self.broker: EngineProcess | None = None
        self.admin = SyncRemotingClient()
        try:
            self.start_broker()
        except BaseException:
            self.stop()
            raise

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    def start_broker(self) -> None:
        args = ["-m", "broker.server", "-c", str(self.conf), "-n", self.namesrv.addr,
                "--listen-port", str(self.port)]  # fmt: skip
        self.broker = _drain(EngineProcess(args))

    def restart_broker(self) -> None:
        assert self.broker.stop() == 0, "".join(self.broker.output)
        self.start_broker()

    def request(self, code: int, fields: dict | None = None, body: bytes = b""):
        return self.admin.invoke(self.broker_addr, create_request(code, fields, body))

    def create_topic(self, topic: str, queues: int = 4) -> None:
        fields = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
        assert self.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields).ok

    def max_offsets(self, topic: str, queues: int) -> int:
        total = 0
        for queue_id in range(queues):
            response = self.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
            total += int(response.field("offset"))
        return total

    def instance(self, name: str) -> MQClientInstance:
        """A client instance that heartbeats often, so a restarted broker knows it again quickly."""
        return MQClientInstance(self.namesrv_addr, name, heartbeat_interval_ms=500, rebalance_interval_ms=500)

    def push_consumer(self, group: str, topic: str, listener, name: str, **options) -> PushConsumer:
        consumer = PushConsumer(
            group,
            self.namesrv_addr,
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
            instance_name=name,
            rebalance_interval_ms=500,
            persist_interval_ms=500,
            **options,
        )
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        return consumer.start()

    def stop(self) -> None:
        self.admin.close()
        for process in (self.broker, self.namesrv):
            if process is not None:
                process.stop()


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
    namesrv = _drain(EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())]))
    conf = workdir / "broker.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName=broker-a\nbrokerId=0\n"
        f"storePathRootDir={workdir / 'store'}\n"
        "autoCreateTopicEnable=true\nautoCreateSubscriptionGroup=true\n"
        f"{SMALL_STORE}"
        f"registerBrokerIntervalMillis=500\n{extra_conf}"
    )
    try:
        args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv.addr]
        broker = _drain(EngineProcess(args))
    except BaseException:
        namesrv.stop()
        raise
    return OneBrokerCluster(namesrv, broker, SyncRemotingClient())
