"""Issue 31 §2 in controller mode, with real processes (a controller, a name server and two
brokers sharing ``haAuthSecret``):

- the replicas sign in on the HA port and stay in sync; a stranger's controller-mode handshake
  claiming the slave's brokerId is closed unanswered;
- a broker elected master while its HA port is taken refuses writes and says why, then serves
  once the port is free. Before: no refusal came within 30 s (the change of role failed, its
  retry skipped listening, logged "now the master" and took writes with no HA listener);
- with ACL on the brokers and no shared secret, the replicas sign in with their inner account
  (an admin account of plain_acl.yml) and stay in sync.
"""

from __future__ import annotations

import socket

import pytest

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode, ResponseCode
from broker.local_cluster import wait_until
from broker.local_failover import TOPIC, ControllerModeSet
from broker.store.ha.protocol import HANDSHAKE, HANDSHAKE_MAGIC, HANDSHAKE_VERSION

SECRET = "the set's HA sign-in secret"
ADMIN = SessionCredentials("ha-ctl-admin", "ha-ctl-admin-secret")
SEND = {"producerGroup": "ha-ctl", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": ""}  # fmt: skip


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    harness = ControllerModeSet(tmp_path_factory.mktemp("ha-auth-ctl"), {"haAuthSecret": SECRET}).start()
    try:
        yield harness
    finally:
        harness.stop()


@pytest.fixture(scope="module")
def acl_replicas(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ha-acl-ctl")
    acl_file = workdir / "plain_acl.yml"
    acl_file.write_text(
        f"accounts:\n  - {{accessKey: {ADMIN.access_key}, secretKey: {ADMIN.secret_key}, admin: true,"
        " defaultTopicPerm: PUB|SUB, defaultGroupPerm: PUB|SUB}\n"
    )
    settings = {
        "aclEnable": "true",
        "aclFilePath": acl_file,
        "innerAccessKey": ADMIN.access_key,
        "innerSecretKey": ADMIN.secret_key,
    }
    harness = ControllerModeSet(workdir, settings, credentials=ADMIN).start()
    try:
        yield harness
    finally:
        harness.stop()


def _send(harness: ControllerModeSet, name: str):
    assert harness.cluster is not None
    return harness.cluster.request(RequestCode.SEND_MESSAGE, SEND, b"body", addr=harness.broker(name).addr)


def _ha_port(harness: ControllerModeSet, name: str) -> int:
    assert harness.cluster is not None
    conf = harness.cluster.confs[name].read_text()
    return int(next(line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("haListenPort=")))


def test_replicas_sign_in_and_a_strangers_handshake_is_closed(replicas):
    master, info = replicas.wait_in_sync()
    assert _send(replicas, master).code == ResponseCode.SUCCESS  # the in-sync slave confirmed it
    slave_id = next(i for i in info.sync_state_set if i != info.master_id)
    with socket.create_connection(("127.0.0.1", _ha_port(replicas, master)), timeout=10) as fake:
        fake.sendall(HANDSHAKE.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, slave_id, 2**62, 0))
        received = b""
        while chunk := fake.recv(65536):
            received += chunk
    assert received == b""
    assert replicas.runtime(master)["haSlaveCount"] == "1"


def test_a_taken_ha_port_on_promotion_refuses_writes_until_bound(replicas):
    master, info = replicas.wait_in_sync()
    successor = replicas.slave_of(master)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", _ha_port(replicas, successor)))
    squatter.listen()
    try:
        replicas.kill(master)
        replicas.wait_for_master(after_epoch=info.master_epoch, not_name=master)

        def refused() -> str:
            return replicas.runtime(successor).get("writeRefusedReason", "")

        wait_until(
            lambda: "HA port" in refused(), timeout=30, what="the new master saying its HA port is taken"
        )
        answer = _send(replicas, successor)
        assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, answer.remark
        assert "HA port" in answer.remark and "cannot be bound" in answer.remark
    finally:
        squatter.close()
    wait_until(lambda: _send(replicas, successor).code == ResponseCode.SUCCESS, timeout=30, what="serving")
    socket.create_connection(("127.0.0.1", _ha_port(replicas, successor)), timeout=5).close()  # served


def test_with_acl_the_replicas_sign_in_with_their_inner_account(acl_replicas):
    master, _ = acl_replicas.wait_in_sync()
    slave = acl_replicas.slave_of(master)
    assert _send(acl_replicas, master).code == ResponseCode.SUCCESS  # the in-sync slave confirmed it
    acl_replicas.wait_caught_up(master)
    assert acl_replicas.runtime(slave)["haLastError"] == ""
    assert "signed in as brokerId" in acl_replicas.logs()
