"""Topics this broker serves, persisted in ``store/config/topics.json``."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from broker.common import topic_config as tc
from broker.common.json_config_file import topics_file
from broker.common.names import shown, topic_problem
from broker.common.topic_config import TopicConfig

from .persist_batching import PersistBatching, put_or_undo

log = logging.getLogger(__name__)

# System topics every broker has (RocketMQ creates these at start).
_SYSTEM_TOPICS = {
    tc.SCHEDULE_TOPIC: (18, 18),
    tc.TRANS_HALF_TOPIC: (1, 1),
    tc.TRANS_OP_HALF_TOPIC: (1, 1),
    tc.SELF_TEST_TOPIC: (1, 1),
    tc.OFFSET_MOVED_EVENT: (1, 1),
}


class TopicConfigManager:
    def __init__(
        self, config_dir: Path, cluster: str, broker_name: str, auto_create: bool, queue_nums: int
    ) -> None:
        self.file = topics_file(config_dir)
        self.table: dict[str, TopicConfig] = {}
        self.lock = threading.Lock()
        self.cluster, self.broker_name = cluster, broker_name
        self.auto_create = auto_create
        self.default_queue_nums = queue_nums
        # How many topics clients may create (maxTopicCount): by send (auto-create) or by request.
        # The broker's own retry and DLQ topics are not counted against it: groups are limited.
        self.limit: Callable[[], int] = lambda: 1 << 62
        # Whether the disk is full (the controller points it at the store): a topic created on
        # first use could not be written, so it is not created in memory either, where it would
        # be served (and registered with the name servers) until a restart lost it.
        self.disk_full: Callable[[], bool] = lambda: False
        self._writes = PersistBatching(self.persist)  # see deferred_persist()
        self._counted: tuple[tuple, int] = ((), 0)  # (table state, its counted topics), see counted()

    @property
    def data_version(self):
        return self.file.data_version

    def load(self) -> None:
        self.table = {}
        for name, data in self.file.load().items():
            # Made before names were checked (or by hand): no request could name it any more, and
            # the name servers would refuse a registration carrying it.
            if topic_problem(name):
                log.warning("topics.json: ignoring %s: %s", shown(name), topic_problem(name))
                continue
            self.table[name] = TopicConfig.from_json_dict(data)
        for name, (read, write) in _SYSTEM_TOPICS.items():
            self.table.setdefault(name, TopicConfig(name, read, write))
        # Clusters and broker names are topics too, so clients can address them (as RocketMQ).
        for name in (self.cluster, self.broker_name):
            self.table.setdefault(name, TopicConfig(name, 16, 16, tc.PERM_READ | tc.PERM_WRITE))
        self._refresh_default_topic()
        self.persist()

    def _refresh_default_topic(self) -> None:
        perm = tc.PERM_READ | tc.PERM_WRITE
        if self.auto_create:
            perm |= tc.PERM_INHERIT
        default = self.table.get(tc.AUTO_CREATE_TOPIC_KEY_TOPIC)
        if default is None:
            default = TopicConfig(
                tc.AUTO_CREATE_TOPIC_KEY_TOPIC, self.default_queue_nums, self.default_queue_nums
            )
            self.table[default.topic_name] = default
        default.perm = perm

    def set_auto_create(self, enabled: bool) -> None:
        self.auto_create = enabled
        with self.lock:
            self._refresh_default_topic()
            self.data_version.next_version()
        self.persist()

    def set_default_queue_nums(self, queue_nums: int) -> None:
        """defaultTopicQueueNums changed at run time: topics auto-created from now on get up to
        that many queues (the default topic's queue counts cap them)."""
        self.default_queue_nums = queue_nums
        with self.lock:
            default = self.table.get(tc.AUTO_CREATE_TOPIC_KEY_TOPIC)
            if default is not None:
                default.read_queue_nums = default.write_queue_nums = queue_nums
            self.data_version.next_version()
        self.persist()

    def persist(self) -> bool:
        with self.lock:
            snapshot = {name: config.to_json_dict() for name, config in self.table.items()}
        return self.file.persist(snapshot)

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def update(self, config: TopicConfig) -> None:
        with self.lock:
            self.table[config.topic_name] = config
            self.data_version.next_version()
        self._writes.changed()

    def update_durably(self, config: TopicConfig) -> bool:
        """An operator's create or update: written before it is acknowledged; False (and nothing
        changed) when the disk could not take it (``file.file.last_error`` says why)."""
        return put_or_undo(self.table, self.lock, config.topic_name, config, self.data_version, self.persist)

    def deferred_persist(self) -> contextlib.AbstractContextManager[None]:
        """Changes made inside are written to disk once, at the end (see PersistBatching)."""
        return self._writes.batch()

    def delete(self, topic: str) -> bool:
        with self.lock:
            removed = self.table.pop(topic, None) is not None
            if removed:
                self.data_version.next_version()
        if removed:
            self.persist()
        return removed

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from the default topic when that one allows inheritance."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None or not tc.is_inherited(default.perm) or self.is_full() or self.disk_full():
            return None
        queues = max(1, min(queue_nums, default.write_queue_nums))
        config = TopicConfig(topic, queues, queues, default.perm & ~tc.PERM_INHERIT, topic_sys_flag=sys_flag)
        self.update(config)
        return config

    def is_full(self) -> bool:
        return self.counted() >= self.limit()

    def counted(self) -> int:
        """Topics counted against maxTopicCount: all but retry and DLQ topics, which the broker
        makes for its groups (at most two a group, so maxSubscriptionGroupCount bounds them).
        Recounted only when the table changed: a refused auto-create must stay cheap."""
        state = (id(self.table), len(self.table), self.data_version.timestamp, self.data_version.counter)
        if self._counted[0] != state:
            own = (tc.RETRY_GROUP_TOPIC_PREFIX, tc.DLQ_GROUP_TOPIC_PREFIX)
            self._counted = (state, sum(not name.startswith(own) for name in list(self.table)))
        return self._counted[1]

    def ensure(self, topic: str, queues: int, perm: int) -> TopicConfig | None:
        """A topic the broker itself needs (retry/DLQ): created on first use; None while the disk
        is full (the write that needs it is refused anyway)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        if self.disk_full():
            return None
        config = TopicConfig(topic, queues, queues, perm)
        self.update(config)
        return config

    def serialize_wrapper(self) -> dict:
        """TopicConfigSerializeWrapper: what the broker registers with name servers."""
        with self.lock:
            table = {name: config.to_json_dict() for name, config in self.table.items()}
        return {"topicConfigTable": table, "dataVersion": self.data_version.to_json()}
