"""The route model: which brokers serve a topic, and which brokers make up each cluster.

One set of types for the whole project: the name server builds them and writes them with
``to_json`` (RocketMQ's TopicRouteData, QueueData, BrokerData and ClusterInfo field names, which
``fastjson.dumps`` turns into the bytes Java clients expect); the SDK, the admin client, the CLI
and the console read the same types back with ``from_json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.common.hosts import HostPort, parse_host
from broker.common.message_queue import MessageQueue
from broker.common.topic_config import is_readable, is_writeable

MASTER_ID = 0


def _int(value: Any) -> int:
    """A number from a peer's JSON; absent or malformed counts as 0 (as fastjson reads null)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass(slots=True)
class QueueData:
    """One broker's queues of a topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm,
                "topicSysFlag": self.topic_sys_flag}  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> QueueData:
        return cls(
            broker_name=str(raw.get("brokerName", "")),
            read_queue_nums=_int(raw.get("readQueueNums")),
            write_queue_nums=_int(raw.get("writeQueueNums")),
            perm=_int(raw.get("perm")),
            topic_sys_flag=_int(raw.get("topicSysFlag")),
        )


@dataclass(slots=True)
class BrokerData:
    """A broker set: its name and the address of each member by broker id (0 is the master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def any_addr(self) -> str | None:
        """The master, else the lowest-id slave: reads may be served by either."""
        if not self.broker_addrs:
            return None
        return self.broker_addrs.get(MASTER_ID) or self.broker_addrs[min(self.broker_addrs)]

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "brokerName": self.broker_name,
                "brokerAddrs": dict(sorted(self.broker_addrs.items()))}  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> BrokerData:
        addrs = {_int(k): str(v) for k, v in (raw.get("brokerAddrs") or {}).items()}
        return cls(
            cluster=str(raw.get("cluster", "")),
            broker_name=str(raw.get("brokerName", "")),
            broker_addrs=addrs,
        )


@dataclass(slots=True)
class TopicRouteData:
    """A topic's route: its queues per broker and those brokers' addresses (both by broker name)."""

    topic: str
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None

    def to_json(self) -> dict:
        return {
            "orderTopicConf": self.order_topic_conf,
            "queueDatas": [q.to_json() for q in self.queue_datas],
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": {},
        }

    @classmethod
    def from_json(cls, topic: str, raw: dict[str, Any]) -> TopicRouteData:
        queues = sorted(
            (QueueData.from_json(q) for q in raw.get("queueDatas") or []), key=lambda q: q.broker_name
        )
        brokers = sorted(
            (BrokerData.from_json(b) for b in raw.get("brokerDatas") or []), key=lambda b: b.broker_name
        )
        return cls(topic, queues, brokers, raw.get("orderTopicConf"))

    def broker(self, broker_name: str) -> BrokerData | None:
        for data in self.broker_datas:
            if data.broker_name == broker_name:
                return data
        return None

    def master_addrs(self) -> list[str]:
        return [b.master_addr for b in self.broker_datas if b.master_addr]

    def readable_queues(self) -> list[MessageQueue]:
        """Every queue consumers may read, master or not (RocketMQ's subscribe info)."""
        return [
            MessageQueue(self.topic, q.broker_name, queue_id)
            for q in self.queue_datas
            if is_readable(q.perm)
            for queue_id in range(q.read_queue_nums)
        ]

    def writable_queues(self) -> list[MessageQueue]:
        """Every queue producers may send to: writable, on a broker set with a master (publish info)."""
        masters = {b.broker_name for b in self.broker_datas if b.master_addr}
        return [
            MessageQueue(self.topic, q.broker_name, queue_id)
            for q in self.queue_datas
            if is_writeable(q.perm) and q.broker_name in masters
            for queue_id in range(q.write_queue_nums)
        ]


@dataclass(slots=True)
class ClusterInfo:
    """Every broker set by name, and each cluster's broker names (RocketMQ's ClusterInfo)."""

    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def to_json(self) -> dict:
        return {
            "brokerAddrTable": {name: data.to_json() for name, data in sorted(self.brokers.items())},
            "clusterAddrTable": {name: sorted(members) for name, members in sorted(self.clusters.items())},
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ClusterInfo:
        table = raw.get("brokerAddrTable") or {}
        clusters = raw.get("clusterAddrTable") or {}
        return cls(
            brokers={str(name): BrokerData.from_json(data) for name, data in table.items()},
            clusters={str(name): sorted(str(b) for b in members) for name, members in clusters.items()},
        )

    def brokers_of(self, cluster: str) -> list[BrokerData]:
        """The cluster's broker sets by name; empty for a cluster the name server does not know."""
        return [self.brokers[name] for name in sorted(self.clusters.get(cluster, ())) if name in self.brokers]

    def master_addrs(self, cluster: str) -> list[str]:
        return [b.master_addr for b in self.brokers_of(cluster) if b.master_addr]

    def all_addrs(self, cluster: str) -> list[str]:
        return [addr for b in self.brokers_of(cluster) for _, addr in sorted(b.broker_addrs.items())]

    def all_master_addrs(self) -> list[str]:
        return [b.master_addr for _, b in sorted(self.brokers.items()) if b.master_addr]

    def broker_name_of(self, addr: str) -> str | None:
        for data in self.brokers.values():
            if addr in data.broker_addrs.values():
                return data.broker_name
        return None

    def broker_name_at(self, host: HostPort) -> str | None:
        """The broker set one of whose members listens at ``host`` (a stored message's store host),
        compared as (ip, port) so an IPv6 address matches with or without brackets."""
        for data in self.brokers.values():
            for addr in data.broker_addrs.values():
                try:
                    if parse_host(addr) == host:
                        return data.broker_name
                except ValueError:  # a registration without a port names no host to match
                    continue
        return None
