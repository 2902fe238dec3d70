"""Epochs of a broker set's commit log, as RocketMQ 5's controller mode records them.

An :class:`EpochEntry` says that the master of ``epoch`` wrote the log from ``start_offset`` to
``end_offset`` (the newest entry is open-ended: RocketMQ's ``Long.MAX_VALUE``). Every broker keeps
the list for its own log (``broker/store/ha/epochs.py``); a slave rejoining a new master compares
the two lists to find the last offset where their logs agree, and cuts its log there.

:class:`EpochEntryCache` is the body of GET_BROKER_EPOCH_CACHE (1007), as RocketMQ's class of that
name (JSON field names included), which mqadmin ``getBrokerEpoch`` and the console read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

OPEN_END = (1 << 63) - 1  # Java's Long.MAX_VALUE: the newest epoch has not ended
MAX_ENTRIES = 100_000  # a body naming more epochs than this is refused, not parsed
MAX_BODY_BYTES = 16 * 1024 * 1024


class EpochBodyError(ValueError):
    """A GET_BROKER_EPOCH_CACHE body that is not an EpochEntryCache."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = OPEN_END

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}

    @classmethod
    def from_json(cls, raw: object) -> EpochEntry:
        if not isinstance(raw, dict):
            raise EpochBodyError("an epoch entry must be an object")
        try:
            epoch, start, end = raw["epoch"], raw["startOffset"], raw.get("endOffset", OPEN_END)
        except KeyError as exc:
            raise EpochBodyError(f"an epoch entry lacks {exc.args[0]}") from None
        if not all(type(v) is int for v in (epoch, start, end)):
            raise EpochBodyError("epoch, startOffset and endOffset must be integers")
        if not (0 <= epoch < 1 << 31 and 0 <= start <= end <= OPEN_END):
            raise EpochBodyError(f"epoch entry out of range: {epoch} [{start}, {end})")
        return cls(epoch, start, end)


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: tuple[EpochEntry, ...]
    max_offset: int

    def encode(self) -> bytes:
        return json.dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "brokerId": self.broker_id,
                "epochList": [e.to_json() for e in self.epoch_list],
                "maxOffset": self.max_offset,
            }
        ).encode()

    @classmethod
    def decode(cls, body: bytes) -> EpochEntryCache:
        if len(body) > MAX_BODY_BYTES:
            raise EpochBodyError("the epoch cache body is too large")
        try:
            raw = json.loads(body)
        except ValueError as exc:
            raise EpochBodyError(f"the epoch cache body is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise EpochBodyError("the epoch cache body must be an object")
        entries = raw.get("epochList") or []
        if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
            raise EpochBodyError("epochList must be a list of at most 100,000 entries")
        broker_id, max_offset = raw.get("brokerId", 0), raw.get("maxOffset", 0)
        if type(broker_id) is not int or type(max_offset) is not int:
            raise EpochBodyError("brokerId and maxOffset must be integers")
        return cls(
            cluster_name=str(raw.get("clusterName") or ""),
            broker_name=str(raw.get("brokerName") or ""),
            broker_id=broker_id,
            epoch_list=tuple(EpochEntry.from_json(e) for e in entries),
            max_offset=max_offset,
        )
