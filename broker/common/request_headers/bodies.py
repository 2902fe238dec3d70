"""Bodies of LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): small fixed JSON objects, kept beside the
headers of the same requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from broker.common.request_headers.base import HeaderError


def _mq_json(mq: dict) -> dict:
    # MessageQueue as fastjson writes it: properties in alphabetical order.
    return {"brokerName": mq["brokerName"], "queueId": int(mq["queueId"]), "topic": mq["topic"]}


@dataclass(slots=True)
class LockBatchRequestBody:
    consumer_group: str
    client_id: str
    mq_set: list[dict] = field(default_factory=list)  # MessageQueue JSON objects
    only_this_broker: bool = False

    def to_json_dict(self) -> dict:
        return {
            "consumerGroup": self.consumer_group,
            "clientId": self.client_id,
            "onlyThisBroker": self.only_this_broker,
            "mqSet": [_mq_json(mq) for mq in self.mq_set],
        }

    @classmethod
    def from_json_dict(cls, data: dict) -> LockBatchRequestBody:
        try:
            return cls(
                str(data["consumerGroup"]),
                str(data["clientId"]),
                [_mq_json(mq) for mq in data.get("mqSet") or []],
                bool(data.get("onlyThisBroker", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HeaderError(f"malformed lock batch body: {exc!r}") from None


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    pass


@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[dict] = field(default_factory=list)

    KEY: ClassVar[str] = "lockOKMQSet"

    def to_json_dict(self) -> dict:
        return {self.KEY: [_mq_json(mq) for mq in self.lock_ok_mq_set]}

    @classmethod
    def from_json_dict(cls, data: dict) -> LockBatchResponseBody:
        try:
            return cls([_mq_json(mq) for mq in data.get(cls.KEY) or []])
        except (KeyError, TypeError, ValueError) as exc:
            raise HeaderError(f"malformed lock batch response: {exc!r}") from None
