"""One ``plain_acl.yml`` in use: loaded at start, re-read when it changes, written atomically.

``AclFile.current`` is the configuration every request is checked against. The file's
modification time and size are looked at every ``reload_interval_ms`` (a stat, on the loop; the
read and parse of a changed file run on a thread): a file that now parses replaces the
configuration at once; one that does not is logged, and the previous configuration stays in use
until the file is fixed. A missing file at start is an error (ACL turned on without accounts
would refuse everything: say so instead); one deleted later keeps the last configuration.

Changes made over the wire (the ACL admin requests) are written to a temporary file in the same
directory, fsynced and renamed over the file, so a crash leaves the old file or the new one,
never half of one, and the running configuration changes only once the write succeeded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from broker.common.atomic_file import replace_atomically

from .plain_config import AclConfig, AclConfigError, parse_acl_yaml

log = logging.getLogger(__name__)


class AclFile:
    def __init__(self, path: str | Path, reload_interval_ms: int = 1000) -> None:
        self.path = Path(path)
        self.reload_interval_ms = reload_interval_ms
        self.current = AclConfig()
        self.counter = 0  # the data version: bumped at each configuration taken into use
        self.timestamp = int(time.time() * 1000)
        self.last_error: str | None = None  # why the file on disk is not the one in use
        self._stamp: tuple[int, int] | None = None
        self._watcher: asyncio.Task | None = None

    def load(self) -> AclConfig:
        """Read the file at start; raises ``AclConfigError`` naming the file and the problem."""
        try:
            stamp, text = self._read()
        except OSError as exc:
            raise AclConfigError(f"{self.path}: cannot read the ACL file: {exc.strerror}") from None
        try:
            config = parse_acl_yaml(text)
        except AclConfigError as exc:
            raise AclConfigError(f"{self.path}: {exc}") from None
        self._use(config, stamp)
        return config

    def _read(self) -> tuple[tuple[int, int], bytes]:
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            return (st.st_mtime_ns, st.st_size), f.read()

    def _use(self, config: AclConfig, stamp: tuple[int, int] | None) -> None:
        self.current = config
        self._stamp = stamp
        self.counter += 1
        self.timestamp = int(time.time() * 1000)
        self.last_error = None

    def changed_on_disk(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False  # deleted or unreadable: keep what is in use
        return (st.st_mtime_ns, st.st_size) != self._stamp

    def reload(self) -> bool:
        """Re-read the file if it changed; True when a new configuration is in use."""
        if not self.changed_on_disk():
            return False
        try:
            stamp, text = self._read()
            config = parse_acl_yaml(text)
        except (OSError, AclConfigError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            try:
                self._stamp = (os.stat(self.path).st_mtime_ns, os.stat(self.path).st_size)
            except OSError:
                pass
            self.last_error = reason
            log.error("%s: not reloaded, the previous ACL stays in use: %s", self.path, reason)
            return False
        self._use(config, stamp)
        log.info("%s reloaded: %d accounts", self.path, len(config.accounts))
        return True

    def write(self, config: AclConfig) -> None:
        """Write ``config`` to the file atomically, then use it (raises OSError, and nothing
        changes, when it cannot be written)."""
        text = config.to_yaml().encode()
        replace_atomically(self.path, text, mode=0o600)  # it holds secret keys
        st = os.stat(self.path)
        self._use(config, (st.st_mtime_ns, st.st_size))

    def version_json(self) -> dict[str, int]:
        """The data version as RocketMQ's DataVersion is written."""
        return {"timestamp": self.timestamp, "counter": self.counter}

    # -- the watcher ------------------------------------------------------------------------
    def start_watching(self) -> None:
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval_ms / 1000)
            try:
                if self.changed_on_disk():
                    await asyncio.to_thread(self.reload)
            except Exception:
                log.exception("watching %s failed", self.path)

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
