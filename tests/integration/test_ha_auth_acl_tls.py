"""Issue 31 §2 with ACL and TLS enforcing on: the slave signs in on the HA port with its inner
account (an admin account of the master's plain_acl.yml) over TLS, and replicates as before; a
plaintext reader, a TLS reader that does not sign in and one signing with a non-admin account get
no byte of the log (before: the HA port streamed the whole log to anyone, TLS and ACL on)."""

from __future__ import annotations

import json
import socket
import ssl
from collections import Counter

import pytest

from broker.client import Producer, SessionCredentials
from broker.client.errors import MQBrokerError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from broker.remoting.client import SyncRemotingClient
from broker.store.ha.auth import CHALLENGE, HELLO, HELLO_MAGIC, PROTOCOL_VERSION, HACredentials, sign_in_frame
from broker.store.ha.protocol import REPORT
from tests.cluster import HA_CLUSTER, MASTER_SLAVE, Cluster, plain_acl

TOPIC = "ha-acl-topic"
ADMIN_KEY, ADMIN_SECRET = "ha-admin-key", "ha-admin-secret"
APP_KEY, APP_SECRET = "ha-app-key", "ha-app-secret"
PLAIN_ACL = plain_acl(
    SessionCredentials(ADMIN_KEY, ADMIN_SECRET),
    SessionCredentials(APP_KEY, APP_SECRET),
    default_perm="PUB|SUB",
)


@pytest.fixture(scope="module")
def secure(tmp_path_factory, certs):
    workdir = tmp_path_factory.mktemp("ha-acl-tls")
    server = certs.server_conf("enforcing")
    client_tls = certs.client_tls()
    cluster = Cluster(workdir, HA_CLUSTER, namesrv_settings=server, client_tls=client_tls)
    cluster.admin.close()
    cluster.admin = SyncRemotingClient(SessionCredentials(ADMIN_KEY, ADMIN_SECRET), tls=client_tls)
    try:
        common = {
            **MASTER_SLAVE.settings,
            **server,
            "tls.enable": "true",
            "tls.client.trustCertPath": certs.ca,
            "aclEnable": "true",
            "innerAccessKey": ADMIN_KEY,
            "innerSecretKey": ADMIN_SECRET,
        }
        for name, role in (
            ("broker-ha", {"brokerRole": "SYNC_MASTER"}),
            ("broker-ha-s", {"brokerRole": "SLAVE"}),
        ):
            acl_file = workdir / f"{name}-plain_acl.yml"
            acl_file.write_text(PLAIN_ACL)
            if name == "broker-ha-s":
                role = {**role, "brokerName": "broker-ha", "brokerId": "1"}
            cluster.add_broker(name, {**common, **role, "aclFilePath": acl_file})
            if name == "broker-ha":
                cluster.create_topic(TOPIC, 1)
        yield cluster, certs
    finally:
        cluster.stop()


def _runtime(cluster, name: str) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=cluster.brokers[name].addr)
    assert response.ok, response.remark
    return json.loads(response.body)["table"]


def _ha_address(cluster) -> tuple[str, int]:
    return "127.0.0.1", int(_runtime(cluster, "broker-ha")["haListenPort"])


def test_the_slave_signs_in_with_its_inner_account_over_tls(secure):
    cluster, certs = secure
    wait_until(lambda: _runtime(cluster, "broker-ha")["haSlaveCount"] == "1", timeout=30, what="the slave")
    producer = Producer(
        "HA_ACL_PRODUCER",
        cluster.namesrv_addr,
        credentials=SessionCredentials(APP_KEY, APP_SECRET),
        tls=certs.client_tls(),
    ).start()
    statuses: Counter[str] = Counter()
    try:
        for i in range(20):
            try:
                statuses[producer.send(Message(TOPIC, f"acl {i}".encode())).send_status] += 1
            except MQBrokerError as exc:
                statuses[ResponseCode(exc.response_code).name] += 1
    finally:
        producer.shutdown()
    assert statuses == Counter({"SEND_OK": 20})
    slave = _runtime(cluster, "broker-ha-s")
    assert slave["haMasterConnected"] == "true" and slave["haLastError"] == ""
    assert slave["commitLogMaxOffset"] == _runtime(cluster, "broker-ha")["commitLogMaxOffset"]


def _read_all(sock: socket.socket) -> bytes:
    received = b""
    sock.settimeout(10)
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionError, ssl.SSLError):
        pass
    return received


def test_readers_without_tls_or_an_admin_signature_get_nothing(secure):
    cluster, certs = secure
    address = _ha_address(cluster)
    with socket.create_connection(address, timeout=10) as plain:
        plain.sendall(REPORT.pack(0))
        assert _read_all(plain) == b""  # TLS enforcing: closed unanswered
    context = ssl.create_default_context(cafile=certs.ca)
    with context.wrap_socket(
        socket.create_connection(address, timeout=10), server_hostname="127.0.0.1"
    ) as tls:
        tls.sendall(REPORT.pack(0))
        assert _read_all(tls) == b""  # TLS, but no sign-in: closed unanswered
    with context.wrap_socket(
        socket.create_connection(address, timeout=10), server_hostname="127.0.0.1"
    ) as tls:
        tls.sendall(HELLO.pack(HELLO_MAGIC, PROTOCOL_VERSION, 0))
        challenge = tls.recv(CHALLENGE.size)
        nonce = CHALLENGE.unpack(challenge)[3]
        app = HACredentials(APP_KEY, APP_SECRET, "broker-ha", 7)  # a real account, but no admin
        tls.sendall(sign_in_frame(app, nonce) + REPORT.pack(0))
        rest = _read_all(tls)
        assert len(rest) == 8 and rest[-2:] == b"\x00\x01"  # the refusal (REFUSED_SIGNATURE), nothing more
