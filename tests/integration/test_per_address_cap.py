"""One client address cannot take every connection (issue 31, §5): ``serverMaxConnectionsPerAddress``
on a real broker's and a real name server's port. Linux routes all of 127.0.0.0/8 to loopback, so
connections bound to 127.0.0.2 are a second client host.

Before the per-address cap (serverMaxConnections=40): 40 connections from 127.0.0.1 took every place
and 5 of 5 from 127.0.0.2 were refused. With serverMaxConnectionsPerAddress=10: 127.0.0.1 holds 10,
and 5 of 5 from 127.0.0.2 are admitted and served.
"""

from __future__ import annotations

import random
import socket
import ssl
import struct
import threading
import time

import pytest

from broker.common.codes import RequestCode
from broker.local_cluster import start_namesrv, write_conf
from broker.remoting.command import create_request
from broker.remoting.frame import encode_frame
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.integration.test_flood_limits import close_all, eof_count, host_port

OTHER_HOST = "127.0.0.2"
TOTAL_CAP, PER_ADDRESS_CAP = 40, 10
capped = cluster_fixture(
    ONE_BROKER,
    {"serverMaxConnections": TOTAL_CAP, "serverMaxConnectionsPerAddress": PER_ADDRESS_CAP},
    topics={"PerAddressTopic": 1},
)


def connect(addr: str, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    return [socket.create_connection(host_port(addr), 10, (source, 0)) for _ in range(count)]


def test_one_address_cannot_take_every_broker_connection(capped):
    capped.request(RequestCode.GET_BROKER_RUNTIME_INFO)  # the test's own client holds one place
    flood = connect(capped.broker_addr, TOTAL_CAP)
    others: list[socket.socket] = []
    try:
        others = connect(capped.broker_addr, 5, OTHER_HOST)
        refused = eof_count(flood, 3), eof_count(others, 1)
        # The test's client is one of 127.0.0.1's ten: 9 of the flood admitted, 31 refused;
        # another host still gets in.
        assert refused == (TOTAL_CAP - (PER_ADDRESS_CAP - 1), 0)
        assert capped.request(RequestCode.GET_BROKER_RUNTIME_INFO).ok  # those admitted are served
        assert f"the cap is {PER_ADDRESS_CAP} per address (serverMaxConnectionsPerAddress)" in "".join(
            capped.broker.output
        )
    finally:
        close_all(flood + others)


def test_a_freed_place_lets_the_same_address_in_again(capped):
    capped.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    held = connect(capped.broker_addr, PER_ADDRESS_CAP - 1)
    try:
        assert eof_count(held, 1) == 0
        assert eof_count(connect(capped.broker_addr, 1), 2) == 1  # the eleventh from 127.0.0.1
        close_all(held[:3])
        again = connect(capped.broker_addr, 3)
        assert eof_count(again, 1) == 0  # the count went down as those closed
        close_all(again)
    finally:
        close_all(held)


def test_one_address_cannot_take_every_name_server_connection(tmp_path):
    conf = write_conf(
        tmp_path / "namesrv.conf",
        {"serverMaxConnections": TOTAL_CAP, "serverMaxConnectionsPerAddress": PER_ADDRESS_CAP},
    )
    namesrv = start_namesrv(conf)
    flood: list[socket.socket] = []
    others: list[socket.socket] = []
    try:
        flood = connect(namesrv.addr, TOTAL_CAP)
        others = connect(namesrv.addr, 5, OTHER_HOST)
        assert (eof_count(flood, 3), eof_count(others, 1)) == (TOTAL_CAP - PER_ADDRESS_CAP, 0)
        assert "(serverMaxConnectionsPerAddress)" in "".join(namesrv.output)
    finally:
        close_all(flood + others)
        assert namesrv.stop() == 0


# -- a TLS port (permissive or enforcing): the place is taken at accept --------------------------
# A TLS record header and one byte of a ClientHello, then nothing: the handshake stalls (for
# HANDSHAKE_TIMEOUT_S) with the connection already past its first byte.
STALLED_HELLO = bytes([0x16, 3, 1, 0, 200, 1])
FIRST_BYTES = (b"", b"\x16", STALLED_HELLO, b"\x00\x00", bytes([0x16, 3, 1, 0, 5, 1, 0, 0, 1, 3]))
CHURN_THREADS, CHURN_PER_THREAD = 8, 75
RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a RST


@pytest.fixture(scope="module", params=["plaintext", "permissive", "enforcing"])
def capped_namesrv(request, tmp_path_factory, certs):
    """A name server with both caps, its port plaintext or TLS in the given mode."""
    workdir = tmp_path_factory.mktemp(f"cap-{request.param}")
    conf = {"serverMaxConnections": TOTAL_CAP, "serverMaxConnectionsPerAddress": PER_ADDRESS_CAP}
    if request.param != "plaintext":
        conf.update(certs.server_conf(request.param))
    namesrv = start_namesrv(write_conf(workdir / "namesrv.conf", conf))
    yield request.param, namesrv
    assert namesrv.stop() == 0


def connect_sending(addr: str, count: int, first: bytes, source: str = "127.0.0.1") -> list[socket.socket]:
    sockets = connect(addr, count, source)
    for sock in sockets:
        sock.sendall(first)
    return sockets


def test_stalled_tls_handshakes_count_for_their_address(capped_namesrv):
    """Before: 40 stalled handshakes from 127.0.0.1 took every place of serverMaxConnections=40
    (0 of them refused) and 0 of 5 TLS clients from 127.0.0.2 were served (closed after their
    handshake). After: 30 of the 40 refused at accept, 5 of 5 from 127.0.0.2 served."""
    mode, namesrv = capped_namesrv
    if mode == "plaintext":
        pytest.skip("no handshake on a plaintext port")
    flood = connect_sending(namesrv.addr, TOTAL_CAP, STALLED_HELLO)
    try:
        assert eof_count(flood, 3) == TOTAL_CAP - PER_ADDRESS_CAP
        assert [served_over_tls(namesrv.addr, OTHER_HOST) for _ in range(5)] == [True] * 5
    finally:
        close_all(flood)


def served_over_tls(addr: str, source: str) -> bool:
    """Whether a TLS connection from ``source`` gets an answer to a request."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with context.wrap_socket(connect(addr, 1, source)[0]) as sock:
            sock.sendall(encode_frame(create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)))
            return len(sock.recv(65536)) > 0
    except OSError:  # closed during or right after the handshake
        return False


def churn(addr: str, count: int, seed: int) -> None:
    """``count`` connections, each sending one of FIRST_BYTES, closed or reset at once."""
    chooser = random.Random(seed)
    for _ in range(count):
        try:
            sock = connect(addr, 1)[0]
            sock.sendall(chooser.choice(FIRST_BYTES))
            if chooser.random() < 0.5:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
            sock.close()
        except OSError:
            pass  # refused over the cap while others were still closing


def hold_every_place(addr: str) -> list[socket.socket]:
    """PER_ADDRESS_CAP connections from 127.0.0.1 the server keeps, once the churn has settled
    (its last closes are still being seen for a moment); fails if the places never come back."""
    deadline = time.monotonic() + 15
    while True:
        held = connect_sending(addr, PER_ADDRESS_CAP, b"\x00")
        if eof_count(held, 1) == 0:
            return held
        close_all(held)
        assert time.monotonic() < deadline, "places of 127.0.0.1 still held after the churn"
        time.sleep(0.5)


def test_open_close_and_reset_churn_leaves_no_place_held(capped_namesrv):
    """600 connections opened and closed or reset, after any first byte (none, a TLS header, a
    stalled ClientHello, plaintext): afterwards 127.0.0.1 still gets all 10 places and no eleventh."""
    churn_then_hold_every_place(capped_namesrv[1].addr, CHURN_PER_THREAD)


@pytest.mark.slow
def test_six_thousand_connections_of_churn_leave_no_place_held(capped_namesrv):
    """The attacker's figure: 6,000 connections of the same churn."""
    churn_then_hold_every_place(capped_namesrv[1].addr, 6000 // CHURN_THREADS)


def churn_then_hold_every_place(addr: str, per_thread: int) -> None:
    threads = [threading.Thread(target=churn, args=(addr, per_thread, seed)) for seed in range(CHURN_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = hold_every_place(addr)
    try:
        assert eof_count(connect_sending(addr, 1, b"\x00"), 2) == 1
    finally:
        close_all(held)
