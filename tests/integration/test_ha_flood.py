"""Issue 31 §2, the attacks that followed the sign-in, with real processes.

Slow-loris: a stranger without the secret held the master's 16 HA places with idle connections
(each dropped only after haHousekeepingInterval) and, topping them up, kept the restarted slave
out for good: 11,965 of 11,965 sends SLAVE_NOT_AVAILABLE in 15 s. Connections that have not
signed in now wait in a pool of their own, the oldest closed to make room, each with 3 s to open.

Acknowledged but never sent: on an open port a connection reported 2^62, then, every 10 ms, the
master's live end; it never read a byte, yet its reports were counted up to the master's end
(~8.4 MB acknowledged that had not left the master). A report now counts only up to what the
connection held on connecting and the bytes handed to its socket since.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter

import pytest

from broker.client import Producer
from broker.local_cluster import wait_until
from broker.store.ha.auth import (
    ANSWER,
    CHALLENGE,
    HELLO,
    HELLO_MAGIC,
    OK,
    PROTOCOL_VERSION,
    SHARED_SECRET_KEY,
    HACredentials,
    sign_in_frame,
)
from broker.store.ha.master import MAX_CONNECTIONS
from broker.store.ha.protocol import REPORT
from tests.cluster import add_slave, start_master_slave
from tests.integration.test_ha_auth import SECRET, TOPIC, _ha_address, _runtime, _slave_count, _status

STRANGERS = 40


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    settings = {"brokerRole": "SYNC_MASTER", "slaveTimeout": 1000, "haAuthSecret": SECRET}
    cluster = start_master_slave(
        tmp_path_factory.mktemp("ha-flood"), with_slave=False, master_settings=settings
    )
    try:
        cluster.create_topic(TOPIC, 1)
        add_slave(cluster, "broker-ha", "broker-ha-s", {"haAuthSecret": SECRET})
        yield cluster
    finally:
        cluster.stop()


class Flood:
    """``count`` connections to ``address`` that never send a byte, each one the master closes
    replaced at once (a1.py of the attack report)."""

    def __init__(self, address: tuple[str, int], count: int = STRANGERS) -> None:
        self.address, self.count = address, count
        self.opened = 0
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            alive = []
            for sock in self._socks:
                try:
                    gone = sock.recv(64) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    sock.close()
                else:
                    alive.append(sock)
            while len(alive) < self.count and not self._stop.is_set():
                try:
                    sock = socket.create_connection(self.address, timeout=1)
                except OSError:
                    break
                sock.setblocking(False)
                alive.append(sock)
                self.opened += 1
            self._socks = alive

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self._socks:
            sock.close()


def test_idle_strangers_do_not_keep_the_real_slave_out(guarded):
    cluster = guarded
    assert wait_until(lambda: _slave_count(cluster) == 1, 30)
    cluster.brokers["broker-ha-s"].stop()
    assert wait_until(lambda: _slave_count(cluster) == 0, 30)
    flood = Flood(_ha_address(cluster))
    producer = Producer("ha-flood", cluster.namesrv_addr).start()
    try:
        assert wait_until(lambda: flood.opened >= STRANGERS, 10)
        cluster.start_broker("broker-ha-s")
        joined = wait_until(lambda: _slave_count(cluster) == 1, 20)
        sends = Counter(_status(producer, b"during the flood %d" % i) for i in range(20))
        slave = _runtime(cluster, cluster.brokers["broker-ha-s"].addr)
        # Figure: 0 of 20 SEND_OK before (the slave never got in), 20 of 20 after.
        print(f"\nslow-loris: slave joined {joined}, sends {dict(sends)}, strangers opened {flood.opened}")
        assert joined, slave.get("haLastError")
        assert sends == {"SEND_OK": 20}, (sends, slave.get("haLastError"))
        opened = flood.opened
        assert wait_until(lambda: flood.opened > opened + STRANGERS, 15)  # still flooding
        assert _slave_count(cluster) == 1  # and the slave stays
    finally:
        flood.close()
        producer.shutdown()


def test_a_connection_that_never_opens_is_closed_within_seconds(guarded):
    """Closed (3 s from accept, whatever haHousekeepingInterval says) without a byte sent."""
    sock = socket.create_connection(_ha_address(guarded), timeout=15)
    try:
        assert sock.recv(64) == b""  # closed by the master, without a byte sent
    finally:
        sock.close()


class SignedIn:
    """A client holding the secret, signed in as the set's slave, reading and reporting 0."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        self.sock.sendall(HELLO.pack(HELLO_MAGIC, PROTOCOL_VERSION, 0))
        nonce = CHALLENGE.unpack(self._read(CHALLENGE.size))[3]
        credentials = HACredentials(SHARED_SECRET_KEY, SECRET, "broker-ha", 1)
        self.sock.sendall(sign_in_frame(credentials, nonce))
        self.status = ANSWER.unpack(self._read(ANSWER.size))[2]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "closed by the master"
            data += chunk
        return data

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                self.sock.sendall(REPORT.pack(0))
                while self.sock.recv(1 << 16):
                    pass
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_a_slave_refused_for_a_full_house_says_why(guarded):
    cluster = guarded
    assert wait_until(lambda: _slave_count(cluster) == 1, 30)
    cluster.brokers["broker-ha-s"].stop()
    assert wait_until(lambda: _slave_count(cluster) == 0, 30)
    holders = [SignedIn(_ha_address(cluster)) for _ in range(MAX_CONNECTIONS)]
    try:
        assert [h.status for h in holders] == [OK] * MAX_CONNECTIONS
        cluster.start_broker("broker-ha-s")
        slave = cluster.brokers["broker-ha-s"].addr
        assert wait_until(lambda: "MAX_CONNECTIONS" in _runtime(cluster, slave).get("haLastError", ""), 20), (
            _runtime(cluster, slave).get("haLastError")
        )
    finally:
        for holder in holders:
            holder.close()
    assert wait_until(lambda: _slave_count(cluster) == 1, 30)  # a place freed: it gets in
