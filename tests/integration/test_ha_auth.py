"""Issue 31 §2, with real processes: the master's HA port takes no orders from strangers.

A SYNC_MASTER and its slave share ``haAuthSecret``. A client that connects to the master's HA
port without it, claims to be a slave and confirms offset 2^62 must not make a send answer
SEND_OK (before: with the real slave stopped, 200 of 200 sends answered SEND_OK, and the messages
were on no slave); it reads no commit-log byte either. The real slave, signing with the secret,
replicates and acknowledges as before; one with the wrong secret is refused and says why.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter

import pytest

from broker.client import Producer
from broker.client.errors import MQBrokerError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from broker.store.ha.auth import HELLO, HELLO_MAGIC, PROTOCOL_VERSION
from broker.store.ha.protocol import REPORT
from tests.cluster import add_slave, start_master_slave

TOPIC = "ha-auth-topic"
SECRET = "a shared HA secret"
SENDS = 200
FAKE_OFFSET = 2**62


def _status(producer: Producer, body: bytes) -> str:
    """A send's status: SEND_OK, or the code the broker answered (SLAVE_NOT_AVAILABLE and
    FLUSH_SLAVE_TIMEOUT come back as the SDK's errors; the message is stored either way)."""
    try:
        return producer.send(Message(TOPIC, body)).send_status
    except MQBrokerError as exc:
        return ResponseCode(exc.response_code).name


def _runtime(cluster, addr: str) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=addr)
    assert response.ok, response.remark
    return json.loads(response.body)["table"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    settings = {"brokerRole": "SYNC_MASTER", "slaveTimeout": 1000, "haAuthSecret": SECRET}
    cluster = start_master_slave(
        tmp_path_factory.mktemp("ha-auth"), with_slave=False, master_settings=settings
    )
    try:
        cluster.create_topic(TOPIC, 1)  # on the master (a slave refuses topic changes)
        add_slave(cluster, "broker-ha", "broker-ha-s", {"haAuthSecret": SECRET})
        yield cluster
    finally:
        cluster.stop()


def _master(cluster) -> str:
    return cluster.brokers["broker-ha"].addr


def _ha_address(cluster) -> tuple[str, int]:
    host = _master(cluster).rsplit(":", 1)[0]
    return host, int(_runtime(cluster, _master(cluster))["haListenPort"])


def _slave_count(cluster) -> int:
    return int(_runtime(cluster, _master(cluster))["haSlaveCount"])


class FakeSlave:
    """An HA client that knows no secret: it reports ``offset`` on connecting and every 200 ms,
    and keeps whatever the master sends."""

    def __init__(self, address: tuple[str, int], offset: int, first: bytes = b"") -> None:
        self.sock = socket.create_connection(address, timeout=5)
        self.offset = offset
        self.received = bytearray()
        self.closed_by_master = threading.Event()
        self._stop = threading.Event()
        self.sock.sendall(first + REPORT.pack(offset))
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._report, self._read)]
        for thread in self._threads:
            thread.start()

    def _report(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.sock.sendall(REPORT.pack(self.offset))
            except OSError:
                return

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.closed_by_master.set()
                return
            self.received += data

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for thread in self._threads:
            thread.join(5)


def test_a_fake_slave_cannot_acknowledge_sends(pair):
    """The slave stopped, a stranger confirms 2^62 on the HA port: no send is SEND_OK; each is
    SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT (stored, and said not to be on a slave)."""
    assert pair.brokers["broker-ha-s"].stop() == 0
    try:
        wait_until(lambda: _slave_count(pair) == 0, timeout=30, what="the slave gone")
        fake = FakeSlave(_ha_address(pair), FAKE_OFFSET)
        producer = Producer("HA_AUTH_FAKE", pair.namesrv_addr).start()
        try:
            time.sleep(0.5)  # the fake's reports have arrived (or it was closed) before the sends
            statuses = Counter(_status(producer, f"m{i}".encode()) for i in range(SENDS))
        finally:
            producer.shutdown()
            fake.close()
        print(f"fake slave confirming {FAKE_OFFSET}: {dict(statuses)}")
        assert statuses["SEND_OK"] == 0, statuses
        assert set(statuses) <= {"SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT"}
        assert fake.closed_by_master.is_set()
    finally:
        pair.start_broker("broker-ha-s")


def test_an_unauthenticated_connection_reads_nothing(pair):
    """Reporting offset 0 (the whole log, please) without signing: closed, not one byte sent.
    Asking to sign in and then sending no signature: the master's challenge, nothing else."""
    wait_until(lambda: _slave_count(pair) == 1, timeout=30, what="the slave signed in")
    producer = Producer("HA_AUTH_READ", pair.namesrv_addr).start()
    try:
        assert _status(producer, b"a secret message") == "SEND_OK"
    finally:
        producer.shutdown()
    for first in (b"", HELLO.pack(HELLO_MAGIC, PROTOCOL_VERSION, 0)):
        fake = FakeSlave(_ha_address(pair), 0, first)
        try:
            closed = fake.closed_by_master.wait(10)
        finally:
            fake.close()
        print(
            f"unauthenticated reader ({'sign-in asked' if first else 'report 0'}): {len(fake.received)} bytes"
        )
        assert closed, "the master kept the connection open"
        assert b"a secret message" not in fake.received
        assert len(fake.received) < 64, bytes(fake.received)  # no transfer: at most the challenge


def test_the_real_slave_signs_in_and_acknowledges(pair):
    """With the secret, the slave replicates and a SYNC_MASTER send is SEND_OK once it has it."""
    wait_until(lambda: _slave_count(pair) == 1, timeout=30, what="the slave signed in")
    producer = Producer("HA_AUTH_REAL", pair.namesrv_addr).start()
    try:
        statuses = Counter(_status(producer, f"r{i}".encode()) for i in range(20))
    finally:
        producer.shutdown()
    assert statuses == Counter({"SEND_OK": 20})
    slave = _runtime(pair, pair.brokers["broker-ha-s"].addr)
    assert slave["haMasterConnected"] == "true" and slave["haLastError"] == ""
    assert _runtime(pair, _master(pair))["haSignIn"] == "haAuthSecret"


def test_a_slave_with_the_wrong_secret_is_refused_and_says_why(pair):
    wrong = add_slave(
        pair, "broker-ha", "broker-ha-wrong", {"haAuthSecret": "not the right secret at all", "brokerId": 2}
    )
    try:

        def refused() -> str:
            return _runtime(pair, wrong.addr)["haLastError"]

        wait_until(lambda: "refused" in refused(), timeout=30, what="the wrong slave refused")
        assert "haAuthSecret" in refused()
        assert _slave_count(pair) == 1  # the real slave only
    finally:
        wrong.stop()
