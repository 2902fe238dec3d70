"""How a consumer group splits a topic's queues among its members (RocketMQ's strategies).

Every member computes the same answer from the same sorted inputs, so no coordinator is needed.
"""

from __future__ import annotations

import bisect
import hashlib
import logging

from broker.common.message_queue import MessageQueue

log = logging.getLogger(__name__)


def _validate(current: str, mqs: list[MessageQueue], cids: list[str]) -> bool:
    if current not in cids:
        log.warning("consumer %s is not in the group's member list %s; it gets no queues", current, cids)
        return False
    return bool(mqs)


class AllocateAveragely:
    """Contiguous blocks: 8 queues over 3 consumers → 3, 3, 2."""

    name = "AVG"

    def allocate(
        self, group: str, current: str, mqs: list[MessageQueue], cids: list[str]
    ) -> list[MessageQueue]:
        if not _validate(current, mqs, cids):
            return []
        index, n, m = cids.index(current), len(cids), len(mqs)
        mod = m % n
        size = (m // n + 1 if index < mod else m // n) if m > n else 1
        start = index * size if mod > 0 and index < mod else index * size + mod
        return [mqs[(start + i) % m] for i in range(min(size, m - start))] if start < m else []


class AllocateAveragelyByCircle:
    """Round robin: consumer i gets queues i, i+n, i+2n, …"""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group, current, mqs, cids):
        if not _validate(current, mqs, cids):
            return []
        index = cids.index(current)
        return mqs[index :: len(cids)]


class AllocateConsistentHash:
    """A hash ring with virtual nodes: when a member leaves only its queues move."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10) -> None:
        self.virtual_nodes = virtual_nodes

    @staticmethod
    def _hash(key: str) -> int:
        return int.from_bytes(hashlib.md5(key.encode()).digest()[:8], "big")

    def allocate(self, group, current, mqs, cids):
        if not _validate(current, mqs, cids):
            return []
        ring = sorted((self._hash(f"{cid}{i}"), cid) for cid in cids for i in range(self.virtual_nodes))
        keys = [h for h, _ in ring]
        mine = []
        for mq in mqs:
            position = bisect.bisect_left(keys, self._hash(f"{mq.topic}{mq.broker_name}{mq.queue_id}")) % len(
                ring
            )
            if ring[position][1] == current:
                mine.append(mq)
        return mine


class AllocateByConfig:
    """A fixed list, whatever the group looks like."""

    name = "CONFIG"

    def __init__(self, queues: list[MessageQueue]) -> None:
        self.queues = list(queues)

    def allocate(self, group, current, mqs, cids):
        return [mq for mq in self.queues if mq in mqs]


class AllocateByMachineRoom:
    """Only queues of brokers in this consumer's rooms (broker names ``room@name``), averaged."""

    name = "MACHINE_ROOM"

    def __init__(self, consumer_rooms: set[str]) -> None:
        self.rooms = consumer_rooms

    def allocate(self, group, current, mqs, cids):
        if not _validate(current, mqs, cids):
            return []
        in_rooms = [mq for mq in mqs if mq.broker_name.split("@", 1)[0] in self.rooms]
        return AllocateAveragely().allocate(group, current, in_rooms, cids)
