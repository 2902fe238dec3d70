"""One name server and one broker as real processes, with broker settings chosen per test and a
broker that can be restarted on the same port and store (delay, retry and transaction tests)."""

from __future__ import annotations

from pathlib import Path

from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer
from broker.client.instance import MQClientInstance
from broker.common.codes import RequestCode
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.harness import SMALL_STORE_CONF, EngineProcess, free_port, keep_draining

CLUSTER = "SemanticsCluster"
BROKER_NAME = "broker-s"


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
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()) + SMALL_STORE_CONF)
        namesrv_args = ["-m", "broker.namesrv", "--listen-port", str(free_port())]
        self.namesrv = keep_draining(EngineProcess(namesrv_args))
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
        self.broker = keep_draining(EngineProcess(args))

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
