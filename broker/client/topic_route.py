"""A topic's route as the client sees it: where to send (``TopicPublishInfo``) and which queues
exist to consume (subscribe info), both derived from the name server's TopicRouteData JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.common import topic_config as tc

from .message_queue import MessageQueue

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_addrs: dict[str, dict[int, str]]  # broker name → broker id → address
    raw: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: dict) -> TopicRouteData:
        queues = [
            QueueData(
                q["brokerName"],
                int(q.get("readQueueNums", 0)),
                int(q.get("writeQueueNums", 0)),
                int(q.get("perm", tc.PERM_READ | tc.PERM_WRITE)),
            )
            for q in data.get("queueDatas") or []
        ]
        addrs = {
            b["brokerName"]: {int(bid): addr for bid, addr in (b.get("brokerAddrs") or {}).items()}
            for b in data.get("brokerDatas") or []
        }
        # Sorted by broker name as RocketMQ does, so every client builds the same queue order.
        return cls(sorted(queues, key=lambda q: q.broker_name), addrs, data)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues on brokers with a master (only a master accepts sends)."""
        return [
            MessageQueue(topic, q.broker_name, i)
            for q in self.queue_datas
            if tc.is_writeable(q.perm) and self.master_addr(q.broker_name)
            for i in range(q.write_queue_nums)
        ]

    def subscribe_queues(self, topic: str) -> set[MessageQueue]:
        return {
            MessageQueue(topic, q.broker_name, i)
            for q in self.queue_datas
            if tc.is_readable(q.perm)
            for i in range(q.read_queue_nums)
        }


@dataclass(slots=True)
class TopicPublishInfo:
    """The queues a producer may send a topic to, in a stable order."""

    message_queues: list[MessageQueue]
    route: TopicRouteData | None = None

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)

    @classmethod
    def of(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        return cls(route.publish_queues(topic), route)

    @classmethod
    def auto_create(cls, topic: str, default_route: TopicRouteData, queue_nums: int) -> TopicPublishInfo:
        """Send ``topic`` to the brokers serving TBW102 so they create it on first use;
        as many queues as asked, capped by TBW102's own count on each broker."""
        queues = [
            MessageQueue(topic, q.broker_name, i)
            for q in default_route.queue_datas
            if tc.is_writeable(q.perm) and default_route.master_addr(q.broker_name)
            for i in range(min(queue_nums, q.write_queue_nums))
        ]
        return cls(queues, default_route)
