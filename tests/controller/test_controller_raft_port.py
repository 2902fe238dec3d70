"""The controller's Raft port (issue 31, section 4, #16): pysyncobj unpickles what the port
receives unless it is encrypted with ``controllerRaftPassword``. Before the fix a single controller
on loopback needed no password, and one pickle sent to its Raft port ran a shell command as the
controller's user. Now a single controller encrypts its port with a random password of its own,
and a group refuses to start without one (tests/controller/test_controller_single.py)."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
import zlib

from broker.local_cluster import free_port, start_controller, wait_until, write_conf


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _send_pickle(raft_port: int, marker: str) -> None:
    data = zlib.compress(pickle.dumps(_Payload(marker)), 3)
    with socket.create_connection(("127.0.0.1", raft_port), timeout=5) as sock:
        sock.sendall(struct.pack("i", len(data)) + data)
        time.sleep(0.5)  # the controller reads it on its next tick


def test_a_pickle_sent_to_a_single_controllers_raft_port_runs_nothing(tmp_path):
    raft_port, port = free_port(), free_port()
    conf = write_conf(
        tmp_path / "controller.conf",
        {
            "listenPort": port,
            "controllerDLegerPeers": f"n0-127.0.0.1:{raft_port}",  # no controllerRaftPassword
            "controllerStorePath": tmp_path / "store",
        },
    )
    controller = start_controller(conf)
    marker = tmp_path / "pwned"
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", raft_port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(listening, timeout=30, what="the Raft port")
        _send_pickle(raft_port, str(marker))
        time.sleep(1)
        assert not marker.exists(), "the Raft port unpickled a stranger's data"
    finally:
        rc = controller.stop()
    assert rc == 0, "".join(controller.output)
