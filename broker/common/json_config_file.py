"""The store's JSON config files in ``store/config/``, written so a crash never loses them.

Each write goes to ``<file>.tmp`` (fsynced), the previous content is kept as ``<file>.bak``,
then the temp file atomically replaces the file — RocketMQ's string2File sequence. Loading falls
back to the ``.bak`` when the main file is missing or damaged.
"""

from __future__ import annotations

import errno
import logging
import shutil
import threading
import time
from pathlib import Path

import orjson

from broker.common.atomic_file import replace_atomically

log = logging.getLogger(__name__)


class JsonConfigFile:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.backup = self.path.with_name(self.path.name + ".bak")
        # Periodic persists run on worker threads; the final one at shutdown may overlap them.
        self._write_lock = threading.Lock()
        # Why the last persist did not write the file (None once one did): a full disk.
        self.last_error: OSError | None = None

    def load(self) -> dict | None:
        for candidate in (self.path, self.backup):
            data = _read_json(candidate)
            if data is not None:
                if candidate is self.backup:
                    log.warning("%s is missing or damaged; loaded %s", self.path, self.backup)
                return data
        return None

    def persist(self, data: dict) -> bool:
        """Write ``data``; False when a full disk kept it from being written (``last_error``
        says why), so a caller that acknowledges a change can undo it and refuse instead."""
        with self._write_lock:
            try:
                self._write(data)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                # A full disk: the file keeps its last content (the temp file never replaced
                # it), and the next persist writes the table again. Starting and stopping on a
                # full disk must not fail for it.
                log.error("%s not written (%s): it keeps its previous content", self.path, exc)
                self.last_error = exc
                return False
            self.last_error = None
            return True

    def _write(self, data: dict) -> None:
        payload = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)

        def keep_backup() -> None:
            if _read_json(self.path) is not None:
                shutil.copyfile(self.path, self.backup)

        replace_atomically(self.path, payload, before_replace=keep_backup)


def _read_json(path: Path) -> dict | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if not raw.strip():
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


class DataVersion:
    """Timestamp + counter; the name server compares it to skip unchanged registrations."""

    def __init__(self, timestamp: int | None = None, counter: int = 0) -> None:
        self.timestamp = int(time.time() * 1000) if timestamp is None else timestamp
        self.counter = counter

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, data: dict | None) -> DataVersion:
        data = data or {}
        return cls(int(data.get("timestamp", 0)), int(data.get("counter", 0)))


JAVA_LONG_MIN, JAVA_LONG_MAX = -(2**63), 2**63 - 1


class ConsumerOffsetTable:
    """consumerOffset.json: ``{"offsetTable": {"topic@group": {queueId: offset}}}``."""

    FILE_NAME = "consumerOffset.json"

    def __init__(self, config_dir: Path | str) -> None:
        self.file = JsonConfigFile(Path(config_dir) / self.FILE_NAME)
        self.table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        data = self.file.load() or {}
        self.table = {
            key: {int(q): int(o) for q, o in queues.items()}
            for key, queues in (data.get("offsetTable") or {}).items()
        }

    def persist(self) -> None:
        with self._lock:
            snapshot = {key: dict(queues) for key, queues in self.table.items()}
        self.file.persist({"offsetTable": snapshot})

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> int:
        """Keep ``offset``; returns the offset it replaced (-1: none)."""
        # A request's number can be any size; one no Java long holds would be kept and then fail
        # every write of the whole table (and every GET_ALL_CONSUMER_OFFSET) from then on.
        if not JAVA_LONG_MIN <= offset <= JAVA_LONG_MAX:
            raise ValueError(f"the offset {offset} of {topic}@{group} queue {queue_id} is no Java long")
        with self._lock:
            queues = self.table.setdefault(f"{topic}@{group}", {})
            previous = queues.get(queue_id, -1)
            queues[queue_id] = offset
        return previous

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}@{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        return {key.split("@", 1)[1] for key in list(self.table) if key.split("@", 1)[0] == topic}

    def topics_of_group(self, group: str) -> set[str]:
        return {key.split("@", 1)[0] for key in list(self.table) if key.split("@", 1)[1] == group}

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self.table if k.split("@", 1)[1] == group]:
                del self.table[key]

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self.table if k.split("@", 1)[0] == topic]:
                del self.table[key]


class DelayOffsetTable:
    """delayOffset.json: ``{"offsetTable": {level: offset}}`` — the delay service's progress."""

    FILE_NAME = "delayOffset.json"

    def __init__(self, config_dir: Path | str) -> None:
        self.file = JsonConfigFile(Path(config_dir) / self.FILE_NAME)
        self.table: dict[int, int] = {}

    def load(self) -> None:
        data = self.file.load() or {}
        self.table = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}

    def persist(self) -> None:
        self.file.persist({"offsetTable": dict(self.table)})


class VersionedJsonTable:
    """A named table of JSON objects plus a DataVersion (topics.json, subscriptionGroup.json).

    The broker keeps typed objects (TopicConfig, SubscriptionGroupConfig) in memory and hands
    their JSON dicts to ``persist``; this class only owns the file's shape.
    """

    def __init__(self, path: Path, table_key: str) -> None:
        self.file = JsonConfigFile(path)
        self.table_key = table_key
        self.data_version = DataVersion()

    def load(self) -> dict[str, dict]:
        data = self.file.load() or {}
        self.data_version = DataVersion.from_json(data.get("dataVersion"))
        return dict(data.get(self.table_key) or {})

    def persist(self, entries: dict[str, dict]) -> bool:
        return self.file.persist({self.table_key: entries, "dataVersion": self.data_version.to_json()})


def topics_file(config_dir: Path | str) -> VersionedJsonTable:
    return VersionedJsonTable(Path(config_dir) / "topics.json", "topicConfigTable")


def subscription_groups_file(config_dir: Path | str) -> VersionedJsonTable:
    return VersionedJsonTable(Path(config_dir) / "subscriptionGroup.json", "subscriptionGroupTable")
