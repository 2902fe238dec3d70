"""What all the connections of one server have read and not yet served, together.

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
