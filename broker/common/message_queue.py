"""A queue of a topic on one broker: the unit producers send to and consumers own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, data: dict) -> MessageQueue:
        return cls(data["topic"], data["brokerName"], int(data["queueId"]))
