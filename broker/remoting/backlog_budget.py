"""What all the connections of one server have read and not yet served, together: complete
requests waiting to be served (``BacklogBudget``) and frames not complete yet (``PartialFrames``).

Each connection stops reading once its own backlog is full (``MAX_BACKLOG_COMMANDS`` /
``MAX_BACKLOG_BYTES`` in connection.py). Those limits add up over connections: two hundred
clients flooding at once could still have 200 x 64 MiB read into the broker's memory. So a
server's connections also share this budget. Once together they hold ``max_commands`` requests
or ``max_bytes`` unserved, a connection that reads while requests of its own still wait stops
reading too, until its own backlog is served, as when its own limit is reached. A connection with
nothing waiting keeps reading: what it reads is served in the same turn, so a client sending at
an ordinary pace is never held back by someone else's flood.
"""

from __future__ import annotations

from typing import Protocol

# RocketMQ's broker queues at most 10,000 sends waiting for its send threads
# (sendThreadPoolQueueCapacity); the bytes bound is ours: a tenth of a small broker's memory.
SERVER_MAX_BACKLOG_COMMANDS = 10_000
SERVER_MAX_BACKLOG_BYTES = 256 * 1024 * 1024


class BacklogBudget:
    __slots__ = ("bytes", "commands", "max_bytes", "max_commands")

    def __init__(
        self, max_commands: int = SERVER_MAX_BACKLOG_COMMANDS, max_bytes: int = SERVER_MAX_BACKLOG_BYTES
    ) -> None:
        self.max_commands, self.max_bytes = max_commands, max_bytes
        self.commands = 0  # read and not served, over every connection
        self.bytes = 0  # read by connections since their backlogs were last empty

    def exhausted(self) -> bool:
        return self.commands >= self.max_commands or self.bytes >= self.max_bytes


class PartialFrames:
    """The bytes of unfinished frames a server's connections hold, together, and who holds them.

    A frame is kept from its first byte until its last arrives. A peer that starts frames and
    never finishes them (one per connection, each up to frameMaxLength) would otherwise make the
    server hold up to connections x 16 MiB. Once the total passes ``max_bytes``, the holders whose
    frames made no progress for longest are closed until it is back under: a client sending a
    whole frame at its own pace keeps adding to its frame at every read, so it is the most recent
    holder and the last to go, while frames left unfinished fall behind and are dropped first.
    """

    __slots__ = ("bytes", "clock", "holders", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.clock = 0  # counts reads that added to an unfinished frame: orders holders by progress
        self.holders: set[PartialFrameHolder] = set()

    def evict(self) -> None:
        """Close the least recently progressed holders until the total is within ``max_bytes``."""
        for holder in sorted(self.holders, key=_progress):
            if self.bytes <= self.max_bytes:
                return
            holder.drop_unfinished_frame(
                f"{self.bytes} bytes of unfinished frames over all connections exceed the limit "
                f"{self.max_bytes} (serverMaxPartialFrameBytes); this connection's "
                f"{holder.partial_bytes}-byte frame made no progress for longest"
            )


class PartialFrameHolder(Protocol):
    partial_bytes: int  # of its unfinished frame, as counted in PartialFrames.bytes
    partial_progress: int  # PartialFrames.clock when its frame last grew

    def drop_unfinished_frame(self, reason: str) -> None:
        """Forget the frame (taking its bytes off the total) and close the connection."""


def _progress(holder: PartialFrameHolder) -> int:
    return holder.partial_progress
