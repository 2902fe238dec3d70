"""The ``checkpoint`` file: how far commit log, consume queues and index were flushed.

Three big-endian longs (store timestamps in ms) at the start of a 4 KiB file, as RocketMQ's
StoreCheckpoint, then a fourth: the commit-log offset flushed when the checkpoint was written
(Kafka's recovery point). Recovery verifies the log from that offset only; re-dispatch after a
crash restarts from the oldest of the timestamps. A file written before the fourth long existed
reads it as 0: recovery then verifies as it did before.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

FILE_SIZE = 4096
LAYOUT = struct.Struct(">qqqq")
OLD_LAYOUT = struct.Struct(">qqq")
# Records stored in the same millisecond as the checkpoint may not be flushed yet.
SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        # Everything below it is on disk: written only after the commit log's fsync reached it.
        self.physic_flushed_offset = 0
        raw = self.path.read_bytes() if self.path.exists() else b""
        if len(raw) >= LAYOUT.size:
            (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
             self.physic_flushed_offset) = LAYOUT.unpack_from(raw)  # fmt: skip
        elif len(raw) >= OLD_LAYOUT.size:
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
                OLD_LAYOUT.unpack_from(raw)
            )

    def flush(self) -> None:
        data = LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
                           self.physic_flushed_offset)  # fmt: skip
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
