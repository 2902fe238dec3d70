"""The ``checkpoint`` file: how far commit log, consume queues and index were flushed.

Three big-endian longs (store timestamps in ms) at the start of a 4 KiB file, as RocketMQ's
StoreCheckpoint. Recovery after a crash restarts from the oldest of them.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

FILE_SIZE = 4096
LAYOUT = struct.Struct(">qqq")
# Records stored in the same millisecond as the checkpoint may not be flushed yet.
SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        if self.path.exists() and self.path.stat().st_size >= LAYOUT.size:
            raw = self.path.read_bytes()[: LAYOUT.size]
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = LAYOUT.unpack(
                raw
            )

    def flush(self) -> None:
        data = LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data.ljust(FILE_SIZE, b"\0"), 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def min_timestamp(self, index_safe: bool = False) -> int:
        lowest = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            lowest = min(lowest, self.index_msg_timestamp)
        return max(0, lowest - SAFETY_MARGIN_MS)

    def close(self) -> None:
        self.flush()
