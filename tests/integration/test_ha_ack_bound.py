"""Issue 31 §2, with real processes: an acknowledgement never exceeds what the connection could
have received (a7.py of the attack report).

On an open HA port (no haAuthSecret) a stranger with a 4 KiB receive buffer reports 2^62, never
reads a byte, and every 10 ms reports the master's current end (commitLogMaxOffset, read from the
runtime figures). Before, its reports were counted up to the master's live end: every send
answered SEND_OK and the acknowledged offset was the master's end, megabytes beyond what had left
the master's process. Now a report counts only up to what the connection held on connecting and
the bytes the master handed to its socket since; what waits in the master's write buffer is not
acknowledged, and the sends beyond it are not SEND_OK.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import Counter
from pathlib import Path

import pytest

from broker.client import Producer
from broker.store.ha.protocol import REPORT
from tests.cluster import start_master_slave
from tests.integration.test_ha_auth import FAKE_OFFSET, TOPIC, _ha_address, _master, _runtime, _status

BODY = 200 * 1024
SLACK = 512 * 1024  # kernel accounting around the two socket buffers


def _kernel_send_buffer_max() -> int:
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])


@pytest.fixture(scope="module")
def open_port(tmp_path_factory):
    # haMaxGapNotInSync 1 MiB: once the stranger's acknowledgements stall, sends answer at once
    # (SLAVE_NOT_AVAILABLE) rather than each after slaveTimeout.
    settings = {"brokerRole": "SYNC_MASTER", "slaveTimeout": 1000, "haMaxGapNotInSync": 1 << 20}
    cluster = start_master_slave(
        tmp_path_factory.mktemp("ha-ack"), with_slave=False, master_settings=settings
    )
    try:
        cluster.create_topic(TOPIC, 1)
        yield cluster
    finally:
        cluster.stop()


class Acker:
    """A stranger that reports ``FAKE_OFFSET``, reads nothing, then reports the master's end."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before the window is set
        self.sock.connect(_ha_address(cluster))
        self.sock.sendall(REPORT.pack(FAKE_OFFSET))
        self.rcvbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                end = int(_runtime(self.cluster, _master(self.cluster))["commitLogMaxOffset"])
                self.sock.sendall(REPORT.pack(end))
            except (OSError, AssertionError):
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _acked(cluster) -> int:
    table = _runtime(cluster, _master(cluster))
    offsets = [int(item.rsplit("=", 1)[1]) for item in table["haSlaveAckOffsets"].split(";") if item]
    return max(offsets, default=-1)


def test_a_connection_cannot_confirm_bytes_it_was_never_handed(open_port):
    cluster = open_port
    send_buffer = _kernel_send_buffer_max()
    if send_buffer > 16 << 20:
        pytest.skip(f"tcp_wmem max {send_buffer} B: the fill would not stay small")
    held = int(_runtime(cluster, _master(cluster))["commitLogMaxOffset"])
    acker = Acker(cluster)
    producer = Producer("ha-ack", cluster.namesrv_addr).start()
    try:
        body = os.urandom(BODY)
        fills = (send_buffer + (6 << 20)) // BODY
        sends = Counter(_status(producer, body) for _ in range(fills))
        end = int(_runtime(cluster, _master(cluster))["commitLogMaxOffset"])
        acked = _acked(cluster)
        # At most: what it held on connecting, the kernel's send queue and its receive buffer.
        could_have_received = held + send_buffer + 2 * acker.rcvbuf + SLACK
        # Figure: before, acked = the master's end (~10 MB), every send SEND_OK; after, acked
        # within what the socket took (~4 MB), the sends beyond not SEND_OK.
        print(f"\nacked {acked}, could have received {could_have_received}, end {end}, sends {dict(sends)}")
        assert acked <= could_have_received, (acked, could_have_received, end)
        assert sends["SEND_OK"] < fills, sends
        assert set(sends) <= {"SEND_OK", "SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT"}, sends
    finally:
        acker.close()
        producer.shutdown()
