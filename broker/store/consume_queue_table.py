"""The store's consume queues by (topic, queue id): loaded at start, made on first write, given
each dispatched message's entry, dropped with their topic."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from broker.common.names import IllegalName, is_path_name, name_path
from broker.common.sysflag import visible_to_consumers

from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .dispatch import DispatchRequest
from .store_config import MessageStoreConfig

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    def __init__(self, root: Path, config: MessageStoreConfig, commitlog: CommitLog) -> None:
        self.directory = root / "consumequeue"
        self.config = config
        self.commitlog = commitlog
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.last_dispatched_ts = 0  # store time of the last message made readable

    def load(self) -> None:
        root = self.directory
        if not root.exists():
            return
        for topic_dir in sorted(root.iterdir()):
            if not is_path_name(topic_dir.name):  # not made by this store: never opened as a queue
                log.warning("ignoring %s: not a topic name", topic_dir)
                continue
            for queue_dir in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
                if not queue_dir.name.isdigit():
                    continue
                queue = self._new(topic_dir.name, int(queue_dir.name))
                queue.load()
                queue.recover()
                self.queues[(topic_dir.name, int(queue_dir.name))] = queue

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(self.directory, topic, queue_id, self.config.mapped_file_size_consume_queue)

    def find(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        queue = self.queues.get((topic, queue_id))
        if queue is None and create:
            return self.for_write(topic, queue_id)
        return queue

    def for_write(self, topic: str, queue_id: int) -> ConsumeQueue:
        with self._lock:
            queue = self.queues.get((topic, queue_id))
            if queue is None:
                queue = self._new(topic, queue_id)
                self.queues[(topic, queue_id)] = queue
            return queue

    def make_readable(self, request: DispatchRequest) -> None:
        """An appended message's consume-queue entry (what pulls read)."""
        if visible_to_consumers(request.sys_flag):
            queue = self.queues.get((request.topic, request.queue_id))
            if queue is None:
                queue = self.for_write(request.topic, request.queue_id)
            queue.put(request.commitlog_offset, request.size, request.tags_code, request.queue_offset)
        self.last_dispatched_ts = request.store_timestamp

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.queues}

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in self.queues if t == topic)

    def drop(self, key: tuple[str, int]) -> None:
        """Remove one queue and its files (a cut log tail was all it held)."""
        with self._lock:
            queue = self.queues.pop(key, None)
            self.commitlog.queue_offsets.pop(key, None)
        if queue is not None:
            queue.destroy()

    def delete_topics(self, topics: set[str]) -> int:
        """Drop the consume queues of ``topics`` (the commit log ages out on its own)."""
        removed = 0
        with self._lock:
            for key in [k for k in self.queues if k[0] in topics]:
                self.queues.pop(key).destroy()
                self.commitlog.queue_offsets.pop(key, None)
                removed += 1
        for topic in topics:
            try:
                topic_dir = name_path(self.directory, topic)
            except IllegalName:
                continue  # never a queue of ours: nothing to remove, and no path outside the store
            if topic_dir.exists() and not any(topic_dir.iterdir()):
                topic_dir.rmdir()
        return removed

    def flush(self) -> None:
        for queue in list(self.queues.values()):
            queue.flush()

    def shutdown(self) -> None:
        for queue in list(self.queues.values()):
            queue.shutdown()
