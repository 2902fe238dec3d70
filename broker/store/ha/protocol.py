"""The HA port's two frames, as RocketMQ's classic HA (DefaultHAClient, DefaultHAConnection).

- slave → master, the report: the slave's commit-log max offset (8 bytes, big-endian). Sent on
  connecting, after each batch it appended and every ``haSendHeartbeatInterval``; it is both the
  request ("send from here") and the acknowledgement ("I have everything below this").
- master → slave, a transfer: physical offset (8) and body size (4), then that many commit-log
  bytes starting at that offset; a body size of 0 is a heartbeat that says where the master is.
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")

# The most a transfer may carry: RocketMQ's slave reads into a 4 MiB buffer, and its
# haTransferBatchSize "cannot be larger than" that. A larger body size closes the connection.
MAX_TRANSFER_BODY = 4 * 1024 * 1024


class HAProtocolError(ValueError):
    """A frame no peer of ours sends: the connection is closed."""


def parse_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets or not); ValueError saying why not."""
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)
