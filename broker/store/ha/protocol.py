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


# -- controller mode (RocketMQ 5's AutoSwitchHA) ------------------------------------------------
# With epochs the connection starts with a handshake (RocketMQ's AutoSwitchHAClient /
# AutoSwitchHAConnection HANDSHAKE state), then goes on as above with each transfer tagged with
# the epoch its bytes were written in:
# - slave → master, the handshake: magic, version, flags (0), the slave's brokerId, its commit-log
#   max offset and its last epoch (0: none). The magic's top bit is set, so a classic master reads
#   the first 8 bytes as a negative offset and closes the connection rather than stream from it.
# - master → slave, the answer: magic, version, status, the master's max offset, its oldest
#   offset, and its epoch entries (count, then ``EPOCH_ITEM`` each: epoch, start offset). A status
#   other than OK comes with no entries, and the master closes the connection.
# - then slave reports as ``REPORT`` and master transfers as ``EPOCH_TRANSFER_HEADER``: offset,
#   body size, the epoch of those bytes and the offset that epoch starts at (epoch 0: bytes older
#   than the first epoch the master knows). A transfer never crosses an epoch's end.
HANDSHAKE_MAGIC = 0xE90C4A5E
HANDSHAKE_VERSION = 1
HANDSHAKE = struct.Struct(">IHHqqi")
HANDSHAKE_ANSWER = struct.Struct(">IHHqqi")
EPOCH_ITEM = struct.Struct(">iq")
EPOCH_TRANSFER_HEADER = struct.Struct(">qiiq")

STATUS_OK = 0
# The slave's last epoch is above the master's: this master was replaced and must not lead it.
STATUS_STALE_MASTER = 1
