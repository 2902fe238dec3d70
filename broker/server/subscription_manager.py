"""Consumer groups known to this broker, persisted in ``store/config/subscriptionGroup.json``."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.common.json_config_file import subscription_groups_file
from broker.common.names import group_problem, shown

from .persist_batching import PersistBatching, put_or_undo

log = logging.getLogger(__name__)
LIMIT_LOG_INTERVAL_S = 10.0


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _NAMES = {
        "group_name": "groupName",
        "consume_enable": "consumeEnable",
        "consume_from_min_enable": "consumeFromMinEnable",
        "consume_broadcast_enable": "consumeBroadcastEnable",
        "retry_queue_nums": "retryQueueNums",
        "retry_max_times": "retryMaxTimes",
        "broker_id": "brokerId",
        "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
        "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    }

    def max_reconsume_times(self, asked: int | None) -> int:
        """A message's retries before the DLQ: what its consumer asked for (a send-back's or a retry
        send's maxReconsumeTimes), else the group's retryMaxTimes."""
        return self.retry_max_times if asked is None or asked < 0 else asked

    def number_problem(self) -> str | None:
        """A number wider than its Java field (int, or long for brokerId): fastjson refuses it, and
        kept it would fail every later write of the whole table (checked on requests, not on
        loading: a table written before is read as it is)."""
        for attr, bits in _NUMBER_BITS.items():
            number = getattr(self, attr)
            if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
                return f"{self._NAMES[attr]}={number} does not fit a Java {'int' if bits == 32 else 'long'}"
        return None

    def to_json_dict(self) -> dict:
        return {camel: getattr(self, attr) for attr, camel in self._NAMES.items()}

    @classmethod
    def from_json_dict(cls, data: dict) -> SubscriptionGroupConfig:
        if not data.get("groupName"):
            raise ValueError("a subscription group needs a groupName")
        values = {attr: data[camel] for attr, camel in cls._NAMES.items() if camel in data}
        for attr in ("retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly"):
            if attr in values:
                values[attr] = int(values[attr])
        return cls(**values)


# SubscriptionGroupConfig's number fields and their Java widths
_NUMBER_BITS = {
    "retry_queue_nums": 32,
    "retry_max_times": 32,
    "broker_id": 64,
    "which_broker_when_consume_slowly": 64,
}


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path, auto_create: bool) -> None:
        self.file = subscription_groups_file(config_dir)
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.auto_create = auto_create
        self.lock = threading.Lock()
        # How many groups may be created on first use (maxSubscriptionGroupCount), read at each
        # creation so a live change applies; the controller points it at the broker's config.
        self.limit: Callable[[], int] = lambda: 1 << 62
        self.disk_full: Callable[[], bool] = lambda: False  # see TopicConfigManager.disk_full
        self._writes = PersistBatching(self.persist)  # see deferred_persist()
        self._logged_at, self._unlogged = -LIMIT_LOG_INTERVAL_S, 0  # see _refused_over_limit()

    def load(self) -> None:
        self.table = {}
        for name, data in self.file.load().items():
            if group_problem(name):  # made by a heartbeat before names were checked (``a/b``)
                log.warning("subscriptionGroup.json: ignoring %s: %s", shown(name), group_problem(name))
                continue
            self.table[name] = SubscriptionGroupConfig.from_json_dict(data)

    def persist(self) -> bool:
        with self.lock:
            snapshot = {name: config.to_json_dict() for name, config in self.table.items()}
        return self.file.persist(snapshot)

    def find(self, group: str, create: bool | None = None) -> SubscriptionGroupConfig | None:
        config = self.table.get(group)
        if config is None and (self.auto_create if create is None else create):
            if self.is_full():
                self._refused_over_limit(group)
                return None
            if self.disk_full():  # it could not be written: no group that a restart would lose
                return None
            config = SubscriptionGroupConfig(group)
            self.update(config)
        return config

    def _refused_over_limit(self, group: str) -> None:
        """Logged at most every 10 s: a flood of made-up names (heartbeats of 256 groups, offset
        commits) would otherwise write a line each."""
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at < LIMIT_LOG_INTERVAL_S:
            return
        log.warning("group %s and %d more not created on first use: %d groups, the limit "
                    "(maxSubscriptionGroupCount)", group, self._unlogged - 1, len(self.table))  # fmt: skip
        self._logged_at, self._unlogged = now, 0

    def for_reading(self, group: str) -> SubscriptionGroupConfig | None:
        """The group a pull reads as: ``find``'s, or on a full disk, where a group made on first
        use could not be written, its default settings, not kept (a read is served on a full
        disk, and nothing is made that a restart would lose)."""
        config = self.find(group)
        if config is None and self.auto_create and self.disk_full() and not self.is_full():
            return SubscriptionGroupConfig(group)
        return config

    def is_full(self) -> bool:
        return len(self.table) >= self.limit()

    def missing_remark(self, group: str) -> str:
        """SUBSCRIPTION_GROUP_NOT_EXIST's remark for a group ``find`` did not give: RocketMQ's,
        with the reason when the group could have been created but for the limit."""
        full = self.auto_create and group not in self.table and self.is_full()
        reason = f" (not created: the broker holds {len(self.table)} groups, maxSubscriptionGroupCount)"
        return f"subscription group not exist, {group}{reason if full else ''}"

    def update(self, config: SubscriptionGroupConfig) -> None:
        with self.lock:
            self.table[config.group_name] = config
            self.file.data_version.next_version()
        self._writes.changed()

    def update_durably(self, config: SubscriptionGroupConfig) -> bool:
        """An operator's create or update: written before it is acknowledged; False (and nothing
        changed) when the disk could not take it (``file.file.last_error`` says why)."""
        return put_or_undo(
            self.table, self.lock, config.group_name, config, self.file.data_version, self.persist
        )

    def deferred_persist(self) -> contextlib.AbstractContextManager[None]:
        """Changes made inside are written to disk once, at the end (see PersistBatching)."""
        return self._writes.batch()

    def delete(self, group: str) -> bool:
        with self.lock:
            removed = self.table.pop(group, None) is not None
        if removed:
            self.persist()
        return removed

    def wrapper(self) -> dict:
        with self.lock:
            table = {name: c.to_json_dict() for name, c in self.table.items()}
        return {"subscriptionGroupTable": table, "dataVersion": self.file.data_version.to_json()}
