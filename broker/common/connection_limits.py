"""What one remoting server (a broker's or a name server's port) lets its peers hold: the keys,
their bounds and defaults, and ``ConnectionLimits``, the values one server runs with. Vocabulary
shared by the remoting layer, which enforces them (``broker/remoting/guards.py``,
``backlog_budget.py``, the frame decoder), and the ``broker.conf`` key table, which checks them.

The same keys, with the same meaning, in ``broker.conf`` and ``namesrv.conf`` (read at start):

- ``frameMaxLength``: the longest frame, its 4-byte length field included (RocketMQ's
  ``com.rocketmq.remoting.frameMaxLength``, 16 MiB). Checked from the length prefix before the
  frame is kept; a longer frame closes its connection.
- ``serverMaxPartialFrameBytes``: the bytes of frames not complete yet, over every connection
  together. Past it, the connections whose unfinished frames made no progress for longest are
  closed (see ``PartialFrames`` in backlog_budget.py), so frames that never finish cannot fill
  the memory while clients sending whole frames are served.
- ``serverChannelMaxIdleTimeSeconds``: a connection that sent nothing for this long and waits for
  nothing from us is closed (RocketMQ's key and default, 120; 0 keeps idle connections).
- ``serverMaxConnections``: connections beyond this many are closed as soon as they are accepted.
- ``serverMaxConnectionsPerAddress``: connections from one client address beyond this many are
  closed as soon as they are accepted, so one host cannot take every place (Kafka's
  ``max.connections.per.ip``; RocketMQ has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.common.conf_file import ConfError, get_int, read_keys

# RocketMQ's frameMaxLength (its NettyDecoder's LengthFieldBasedFrameDecoder): a frame counts its
# 4-byte length field as well, so the length it declares may be at most this minus 4.
DEFAULT_FRAME_MAX_LENGTH = 16 * 1024 * 1024

FRAME_MAX_LENGTH_KEY = "frameMaxLength"
MAX_PARTIAL_FRAME_BYTES_KEY = "serverMaxPartialFrameBytes"
CHANNEL_MAX_IDLE_KEY = "serverChannelMaxIdleTimeSeconds"
MAX_CONNECTIONS_KEY = "serverMaxConnections"
MAX_CONNECTIONS_PER_ADDRESS_KEY = "serverMaxConnectionsPerAddress"
LIMIT_KEYS = (
    FRAME_MAX_LENGTH_KEY,
    MAX_PARTIAL_FRAME_BYTES_KEY,
    CHANNEL_MAX_IDLE_KEY,
    MAX_CONNECTIONS_KEY,
    MAX_CONNECTIONS_PER_ADDRESS_KEY,
)

# The largest is what the 4-byte length field can say. A limit under the broker's maxMessageSize
# (4 MiB) plus a header refuses the largest messages: the operator's choice.
MIN_FRAME_MAX_LENGTH = 1024
MAX_FRAME_MAX_LENGTH = 2**31 - 1
# Eight frames of the largest size, or 32 messages of the default 4 MiB maxMessageSize, arriving at
# the same moment: a broker's memory stays ~128 MiB above its working set however many peers
# leave frames unfinished.
DEFAULT_MAX_PARTIAL_FRAME_BYTES = 128 * 1024 * 1024
DEFAULT_CHANNEL_MAX_IDLE_S = 120  # RocketMQ's serverChannelMaxIdleTimeSeconds
# Each connection is a file descriptor and some kilobytes of buffers; 4096 covers thousands of
# client processes (a RocketMQ client keeps one connection per broker and one to a name server)
# and fits the process's descriptors once the soft limit is raised at start (``ensure_descriptors``
# in broker/remoting/guards.py), so a flood of connections is refused here instead of the accept
# loop failing with "too many open files" for everyone.
DEFAULT_MAX_CONNECTIONS = 4096
MAX_MAX_CONNECTIONS = 1_000_000
# A quarter of the default cap: one address (an app host, or every process of a one-machine
# deployment on 127.0.0.1: console, name server and broker links, hundreds of SDK instances at one
# or two connections each) keeps ~1,000 connections, and three other hosts still get in when one
# floods. An operator who raises serverMaxConnections for a few big hosts raises this as well.
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 1024


@dataclass(frozen=True)
class ConnectionLimits:
    frame_max_length: int = DEFAULT_FRAME_MAX_LENGTH
    max_partial_frame_bytes: int = DEFAULT_MAX_PARTIAL_FRAME_BYTES
    channel_max_idle_s: int = DEFAULT_CHANNEL_MAX_IDLE_S  # 0: idle connections are kept
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS

    def __post_init__(self) -> None:
        if not MIN_FRAME_MAX_LENGTH <= self.frame_max_length <= MAX_FRAME_MAX_LENGTH:
            raise ConfError(
                f"{FRAME_MAX_LENGTH_KEY}={self.frame_max_length} must be between "
                f"{MIN_FRAME_MAX_LENGTH} and {MAX_FRAME_MAX_LENGTH}"
            )
        # Smaller than one frame, a frame of the largest size could never be received.
        if self.max_partial_frame_bytes < self.frame_max_length:
            raise ConfError(
                f"{MAX_PARTIAL_FRAME_BYTES_KEY}={self.max_partial_frame_bytes} must be at least "
                f"{FRAME_MAX_LENGTH_KEY} ({self.frame_max_length})"
            )
        if self.channel_max_idle_s < 0:
            raise ConfError(f"{CHANNEL_MAX_IDLE_KEY}={self.channel_max_idle_s} must be 0 or more")
        if not 1 <= self.max_connections <= MAX_MAX_CONNECTIONS:
            raise ConfError(
                f"{MAX_CONNECTIONS_KEY}={self.max_connections} must be between 1 and {MAX_MAX_CONNECTIONS}"
            )
        if not 1 <= self.max_connections_per_address <= MAX_MAX_CONNECTIONS:
            raise ConfError(
                f"{MAX_CONNECTIONS_PER_ADDRESS_KEY}={self.max_connections_per_address} must be "
                f"between 1 and {MAX_MAX_CONNECTIONS}"
            )

    @classmethod
    def from_conf(cls, conf: Mapping[str, str]) -> ConnectionLimits:
        """The limits a ``namesrv.conf`` sets (the broker reads them through its key table)."""
        return cls(
            *read_keys(
                conf,
                (FRAME_MAX_LENGTH_KEY, get_int, DEFAULT_FRAME_MAX_LENGTH),
                (MAX_PARTIAL_FRAME_BYTES_KEY, get_int, DEFAULT_MAX_PARTIAL_FRAME_BYTES),
                (CHANNEL_MAX_IDLE_KEY, get_int, DEFAULT_CHANNEL_MAX_IDLE_S),
                (MAX_CONNECTIONS_KEY, get_int, DEFAULT_MAX_CONNECTIONS),
                (MAX_CONNECTIONS_PER_ADDRESS_KEY, get_int, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS),
            )
        )
