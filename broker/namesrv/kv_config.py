"""Namespaced key/value settings kept by the name server (ORDER_TOPIC_CONFIG and others).

Persisted to a JSON file (``kvConfig.json`` under the name server's home) so that order-topic
settings survive a restart, as RocketMQ's KVConfigManager does.
"""

from __future__ import annotations

import threading
from pathlib import Path

import orjson

from broker.common.atomic_file import replace_atomically

ORDER_TOPIC_NAMESPACE = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        if path is not None and path.exists():
            self.table = orjson.loads(path.read_bytes()).get("configTable", {})

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.table.setdefault(namespace, {})[key] = value
            self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            self.table.get(namespace, {}).pop(key, None)
            self._persist()

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))

    def namespace_table(self, namespace: str) -> dict[str, str] | None:
        """The namespace's settings, or None when nothing was ever put in it."""
        table = self.table.get(namespace)
        return dict(table) if table is not None else None

    def _persist(self) -> None:
        if self.path is None:
            return
        replace_atomically(self.path, orjson.dumps({"configTable": self.table}))
