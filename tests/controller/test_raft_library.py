"""Importing the controller's Raft library leaves the process's socket functions working."""

from __future__ import annotations

import socket
import subprocess
import sys


def test_importing_the_raft_library_keeps_socket_inet_ntop_working():
    # A fresh interpreter: this one may have imported it already.
    code = (
        "import socket, broker.controller.raft;"
        "print(socket.inet_ntop(socket.AF_INET, bytes([127, 0, 0, 1])),"
        " socket.inet_ntop(socket.AF_INET6, bytes(15) + b'\\x01'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["127.0.0.1", "::1"]


def test_the_message_id_host_decodes_after_the_controller_was_imported():
    import broker.controller.raft  # noqa: F401
    from broker.common.message_codec import decode_host

    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert decode_host(b"\x7f\x00\x00\x01\x00\x00\x27\x10")[0] == "127.0.0.1"
