"""Where a consumer keeps its progress: on the broker (clustering) or in a local file
(broadcasting, every member has its own)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from broker.common.json_config_file import JsonConfigFile
from broker.common.message_queue import MessageQueue

if TYPE_CHECKING:
    from .instance import MQClientInstance

log = logging.getLogger(__name__)


class OffsetStore:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}
        self.lock = threading.Lock()
        self.version = 0  # grows with every change of the table: what a persist has to catch up with

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        with self.lock:
            if increase_only and self.table.get(mq, -1) >= offset:
                return
            self.table[mq] = offset
            self.version += 1

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        with self.lock:
            self.table.pop(mq, None)

    async def read_store(self, mq: MessageQueue) -> int:
        """The offset where it is kept (-1: none)."""
        return self.table.get(mq, -1)

    async def persist(self, mqs) -> None:
        """Keep the offsets of ``mqs`` where they are kept: nowhere but the table here."""


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets committed to the broker set that owns each queue: its master, or — while the master
    is down — a slave (RocketMQ's findBrokerAddressInSubscribe), which keeps them; the offsets in
    memory go to the master again once it is back."""

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        super().__init__()
        self.instance, self.group = instance, group

    async def read_store(self, mq: MessageQueue) -> int:
        addr = self.instance.pull_addr(mq.broker_name)
        if addr is None:
            return -1
        offset = await self.instance.api.query_offset(addr, self.group, mq.topic, mq.queue_id)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mqs) -> None:
        for mq in list(mqs):
            offset, addr = self.table.get(mq), self.instance.pull_addr(mq.broker_name)
            if offset is None or addr is None:
                continue
            try:
                await self.instance.api.update_offset(addr, self.group, mq.topic, mq.queue_id, offset)
            except Exception as exc:
                log.warning("cannot commit the offset of %s: %s", mq, exc)


class LocalFileOffsetStore(OffsetStore):
    """``<dir>/<client id>/<group>/offsets.json`` with a ``.bak`` (RocketMQ's layout), written
    atomically by ``JsonConfigFile``.

    The file is this member's only record of its progress, so it always holds every queue the
    member has an offset for: a queue it stops reading (a rebalance, or the shutdown dropping
    every queue) keeps its offset, as RocketMQ's LocalFileOffsetStore never removes one.
    """

    def __init__(self, directory: str | Path, client_id: str, group: str) -> None:
        super().__init__()
        self.file = JsonConfigFile(Path(directory) / client_id.replace(":", "_") / group / "offsets.json")
        data = self.file.load() or {}
        for key, offset in (data.get("offsetTable") or {}).items():
            topic, broker_name, queue_id = key.rsplit("@", 2)
            self.table[MessageQueue(topic, broker_name, int(queue_id))] = int(offset)
        self._write_lock = threading.Lock()
        self._written_version = self.version  # the table as loaded is what the file holds

    def remove(self, mq: MessageQueue) -> None:
        """Kept (see the class): removing it would erase the offset from the next write."""

    async def persist(self, mqs=None) -> None:
        """Write the whole table when it changed since the last write (fsyncs: off the loop)."""
        with self.lock:
            version = self.version
            if version <= self._written_version:
                return  # unchanged: no thread, no fsync
            table = {f"{mq.topic}@{mq.broker_name}@{mq.queue_id}": o for mq, o in self.table.items()}
        await asyncio.to_thread(self._write, version, table)

    def _write(self, version: int, table: dict[str, int]) -> None:
        # Writes may overlap (the periodic one, cancelled at shutdown, still on its thread while
        # the final one starts): an older table never replaces a newer one on disk.
        with self._write_lock:
            if version <= self._written_version:
                return
            self.file.persist({"offsetTable": table})
            self._written_version = version
