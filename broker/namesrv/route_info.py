"""The name server's whole state: which brokers live, in which clusters, serving which topics.

All in memory (name servers never talk to each other; brokers register with each of them).
The state and the answers are the project's route model (``broker.common.route``: QueueData,
BrokerData, TopicRouteData, ClusterInfo); the processor writes their ``to_json()`` with
``fastjson.dumps`` (absent values as None, Long keys as ints).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.common.route import MASTER_ID, BrokerData, ClusterInfo, QueueData, TopicRouteData
from broker.common.topic_config import PERM_WRITE


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: dict
    connection: object | None
    ha_server_addr: str


@dataclass
class Registration:
    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int
    ha_server_addr: str
    topic_configs: dict[str, dict]
    data_version: dict
    connection: object | None = None


class RouteInfoManager:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.brokers: dict[str, BrokerData] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[str, BrokerLiveInfo] = {}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def register(self, reg: Registration) -> str:
        """Record a broker and its topics; return the master's address (for slaves)."""
        with self.lock:
            self.clusters.setdefault(reg.cluster, set()).add(reg.broker_name)
            data = self.brokers.setdefault(reg.broker_name, BrokerData(reg.cluster, reg.broker_name))
            data.cluster = reg.cluster
            # One address per broker id: a restarted broker on a new port replaces the old one.
            for broker_id, addr in list(data.broker_addrs.items()):
                if addr == reg.broker_addr and broker_id != reg.broker_id:
                    del data.broker_addrs[broker_id]
            data.broker_addrs[reg.broker_id] = reg.broker_addr
            if reg.broker_id == MASTER_ID:
                self._replace_topics(reg.broker_name, reg.topic_configs)
            self.live[reg.broker_addr] = BrokerLiveInfo(self.now_ms(), reg.data_version, reg.connection,
                                                        reg.ha_server_addr)  # fmt: skip
            return "" if reg.broker_id == MASTER_ID else data.broker_addrs.get(MASTER_ID, "")

    def _replace_topics(self, broker_name: str, topic_configs: dict[str, dict]) -> None:
        for topic, queues in list(self.topic_queues.items()):
            if broker_name in queues and topic not in topic_configs:
                del queues[broker_name]
                if not queues:
                    del self.topic_queues[topic]
        for topic, config in topic_configs.items():
            self.topic_queues.setdefault(topic, {})[broker_name] = QueueData(
                broker_name, int(config.get("readQueueNums", 0)), int(config.get("writeQueueNums", 0)),
                int(config.get("perm", 6)), int(config.get("topicSysFlag", 0)),
            )  # fmt: skip

    def unregister(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> None:
        with self.lock:
            self.live.pop(broker_addr, None)
            data = self.brokers.get(broker_name)
            if data is None:
                return
            if data.broker_addrs.get(broker_id) == broker_addr:
                del data.broker_addrs[broker_id]
            if not data.broker_addrs:
                del self.brokers[broker_name]
                names = self.clusters.get(cluster or data.cluster, set())
                names.discard(broker_name)
                if not names:
                    self.clusters.pop(cluster or data.cluster, None)
                self._replace_topics(broker_name, {})

    def remove_by_addr(self, broker_addr: str) -> bool:
        """Forget the broker at ``broker_addr`` (expired, or its connection closed)."""
        with self.lock:
            for data in list(self.brokers.values()):
                for broker_id, addr in list(data.broker_addrs.items()):
                    if addr == broker_addr:
                        self.unregister(data.cluster, data.broker_name, addr, broker_id)
                        return True
            self.live.pop(broker_addr, None)
            return False

    def remove_connection(self, connection) -> None:
        with self.lock:
            for addr, info in list(self.live.items()):
                if info.connection is connection:
                    self.remove_by_addr(addr)

    def scan_not_active(self, expired_ms: int) -> list[str]:
        """Drop brokers not heard from for ``expired_ms``; return their addresses."""
        now = self.now_ms()
        with self.lock:
            stale = [addr for addr, info in self.live.items() if now - info.last_update_ms > expired_ms]
            for addr in stale:
                self.remove_by_addr(addr)
            return stale

    # -- queries ------------------------------------------------------------------------------
    # Answers are copies taken under the lock: registrations may change the state meanwhile.
    def topic_route(self, topic: str, order_conf: str | None = None) -> TopicRouteData | None:
        with self.lock:
            queues = self.topic_queues.get(topic)
            if not queues:
                return None
            names = sorted(queues)
            return TopicRouteData(
                topic,
                [dataclasses.replace(queues[name]) for name in names],
                [_copy(self.brokers[name]) for name in names if name in self.brokers],
                order_conf,
            )

    def cluster_info(self) -> ClusterInfo:
        with self.lock:
            return ClusterInfo(
                {name: _copy(data) for name, data in self.brokers.items()},
                {cluster: sorted(names) for cluster, names in self.clusters.items()},
            )

    def any_broker_addr(self) -> str | None:
        """The address of one registered broker (the first by name, its master if it has one)."""
        with self.lock:
            for _, data in sorted(self.brokers.items()):
                if data.broker_addrs:
                    return data.broker_addrs[min(data.broker_addrs)]
            return None

    def all_topics(self) -> list[str]:
        with self.lock:
            return sorted(self.topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        with self.lock:
            names = self.clusters.get(cluster, set())
            return sorted(t for t, queues in self.topic_queues.items() if names & set(queues))

    def delete_topic(self, topic: str) -> None:
        with self.lock:
            self.topic_queues.pop(topic, None)

    def wipe_write_perm(self, broker_name: str) -> int:
        with self.lock:
            count = 0
            for queues in self.topic_queues.values():
                queue = queues.get(broker_name)
                if queue is not None:
                    queue.perm &= ~PERM_WRITE
                    count += 1
            return count

    def data_version_of(self, broker_addr: str) -> dict | None:
        info = self.live.get(broker_addr)
        return info.data_version if info else None

    def touch(self, broker_addr: str) -> None:
        info = self.live.get(broker_addr)
        if info:
            info.last_update_ms = self.now_ms()


def _copy(data: BrokerData) -> BrokerData:
    return BrokerData(data.cluster, data.broker_name, dict(data.broker_addrs))
