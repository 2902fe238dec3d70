"""TLS on a real name server and broker, one cluster per ``tls.server.mode`` (both servers in the
mode), with the SDK and ``mqadmin``: what each mode accepts, and the error a client that does not
fit it gets. The broker registers with its name server over TLS in permissive (``tls.enable``) and
enforcing (implied by the mode) mode. The console's side is in tests/console/test_console_tls.py.
"""

from __future__ import annotations

import uuid

import pytest

from broker.cli import main as mqadmin
from broker.client import (
    ClientTls,
    ConsumeConcurrentlyStatus,
    Producer,
)
from broker.client.admin import MQAdmin, NameServerUnreachableError
from broker.client.errors import MQClientError
from broker.common.message import Message
from broker.common.message_queue import MessageQueue
from broker.common.tls_modes import TLS_MODES
from broker.common.topic_config import TRACE_TOPIC
from broker.local_cluster import SMALL_STORE, free_port, start_broker, start_namesrv, wait_until, write_conf
from tests.received_messages import round_trip
from tests.tls_certs import BROKER, TOPIC, start_tls_cluster


@pytest.fixture(scope="module", params=TLS_MODES)
def tls_cluster(request, certs, tmp_path_factory):
    cluster = start_tls_cluster(request.param, certs, tmp_path_factory.mktemp(f"tls-{request.param}"))
    yield request.param, cluster
    cluster.stop()


def send_and_receive(namesrv: str, tls: ClientTls, count: int = 5) -> list[bytes]:
    """``count`` messages sent to one queue by a producer and read back by a pull consumer,
    both connecting with ``tls`` (groups of their own each time)."""
    tag = uuid.uuid4().hex[:8]
    groups = (f"tls-producer-{tag}", f"tls-consumer-{tag}")
    return round_trip(namesrv, MessageQueue(TOPIC, BROKER, 0), groups, count, tls=tls)


def run_mqadmin(capsys, *argv: str) -> tuple[int, str, str]:
    code = mqadmin(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the SDK ---------------------------------------------------------------------------------------
def test_sdk_sends_and_receives_in_every_mode_that_accepts_it(tls_cluster, certs):
    mode, cluster = tls_cluster
    # Distinct bodies: delivery is at least once, and a rebalance may hand a message over twice.
    if mode != "enforcing":
        assert len(set(send_and_receive(cluster.namesrv_addr, ClientTls()))) == 5  # plaintext
    if mode != "disabled":
        assert len(set(send_and_receive(cluster.namesrv_addr, certs.client_tls()))) == 5


def test_push_consumer_over_tls(tls_cluster, certs):
    """A push consumer over TLS: pulls held by the broker and its notices to the client (consumer
    ids changed) travel on the TLS connection the client opened."""
    mode, cluster = tls_cluster
    if mode == "disabled":
        pytest.skip("no TLS to test")
    tag = uuid.uuid4().hex[:8]
    got: list[bytes] = []

    def listener(messages, context):
        got.extend(m.body for m in messages if m.body.startswith(tag.encode()))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = cluster.push_consumer(
        f"tls-push-{tag}", TOPIC, listener, f"tls-push-{tag}", tls=certs.client_tls()
    )
    producer = Producer(f"tls-push-producer-{tag}", cluster.namesrv_addr, tls=certs.client_tls()).start()
    try:
        for i in range(5):
            producer.send(Message(TOPIC, f"{tag}-{i}".encode()))
        wait_until(lambda: len(got) >= 5, 30, what="5 pushed messages")
        assert sorted(got) == [f"{tag}-{i}".encode() for i in range(5)]
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_sdk_that_does_not_fit_the_mode_fails_clearly(tls_cluster, certs):
    mode, cluster = tls_cluster
    if mode == "permissive":
        pytest.skip("permissive accepts both")
    tls = ClientTls() if mode == "enforcing" else certs.client_tls()
    expected = "accepts TLS connections only" if mode == "enforcing" else "during the TLS handshake"
    producer = Producer(
        f"misfit-{mode}", cluster.namesrv_addr, tls=tls, instance_name=f"misfit-{mode}"
    ).start()
    try:
        with pytest.raises(MQClientError, match=expected):
            producer.send(Message(TOPIC, b"never"))
    finally:
        producer.shutdown()


def test_sdk_with_the_wrong_trust_store_names_verification(tls_cluster, certs):
    mode, cluster = tls_cluster
    if mode == "disabled":
        pytest.skip("no certificate to verify")
    wrong = ClientTls(enable=True, trust_cert_path=certs.other_ca)
    with (
        MQAdmin(cluster.namesrv_addr, tls=wrong) as admin,
        pytest.raises(NameServerUnreachableError, match="TLS certificate verification failed"),
    ):
        admin.cluster_info()


def test_message_trace_travels_over_tls_too(tls_cluster, certs):
    """The trace producer a traced producer makes for itself connects as its owner does."""
    mode, cluster = tls_cluster
    if mode != "enforcing":
        pytest.skip("plaintext would reach a permissive or disabled cluster anyway")
    before = cluster.max_offsets(TRACE_TOPIC, 1)
    producer = Producer("tls-traced", cluster.namesrv_addr, tls=certs.client_tls(), enable_trace=True).start()
    try:
        producer.send(Message(TOPIC, b"traced"))
        wait_until(lambda: cluster.max_offsets(TRACE_TOPIC, 1) > before, 30, what="a trace record")
    finally:
        producer.shutdown()


# -- mqadmin ---------------------------------------------------------------------------------------
def test_mqadmin_in_every_mode(tls_cluster, certs, capsys, monkeypatch):
    mode, cluster = tls_cluster
    namesrv = ["-n", cluster.namesrv_addr]
    plain = run_mqadmin(capsys, "clusterList", *namesrv)
    secure = run_mqadmin(capsys, "clusterList", *namesrv, "--tls-trust-cert", certs.ca)
    if mode == "disabled":
        assert plain[0] == 0 and BROKER in plain[1]
        assert secure[0] == 1 and "closed the connection during the TLS handshake" in secure[2]
    elif mode == "permissive":
        assert plain[0] == 0 and BROKER in plain[1]
        assert secure[0] == 0 and BROKER in secure[1]
    else:
        assert plain[0] == 1 and "accepts TLS connections only" in plain[2], plain
        assert secure[0] == 0 and BROKER in secure[1]
    if mode != "disabled":
        # The same from the environment (ROCKETMQ_TLS_*), with a command aimed at the broker.
        monkeypatch.setenv("ROCKETMQ_TLS_ENABLE", "true")
        monkeypatch.setenv("ROCKETMQ_TLS_TRUST_CERT", certs.ca)
        code, out, err = run_mqadmin(capsys, "topicList", *namesrv)
        assert code == 0 and TOPIC in out, err
        code, out, err = run_mqadmin(capsys, "topicList", *namesrv, "--tls-trust-cert", certs.other_ca)
        assert code == 1 and "TLS certificate verification failed" in err and "other-ca.pem" in err
        code, out, err = run_mqadmin(capsys, "topicList", *namesrv, "--tls-insecure")
        assert code == 0 and TOPIC in out, err


def test_mqadmin_tls_files_that_cannot_be_used(capsys, tmp_path):
    missing = str(tmp_path / "missing.pem")
    code, _, err = run_mqadmin(capsys, "clusterList", "-n", "127.0.0.1:1", "--tls-trust-cert", missing)
    assert code == 2 and f"tls.client.trustCertPath={missing}: cannot load" in err


def test_servers_with_unusable_tls_settings_do_not_start(tmp_path):
    """A name server or broker whose TLS cannot work stops at start, naming the key."""
    missing = tmp_path / "missing.pem"
    namesrv_conf = write_conf(
        tmp_path / "namesrv.conf",
        {"listenPort": free_port(), "tls.server.mode": "enforcing", "tls.server.certPath": missing},
    )
    with pytest.raises(RuntimeError, match=r"tls\.server\.certPath=.*missing\.pem: cannot load"):
        start_namesrv(namesrv_conf)
    broker_conf = write_conf(
        tmp_path / "broker.conf",
        {"storePathRootDir": tmp_path / "store", "tls.server.mode": "permissive", **SMALL_STORE},
    )
    with pytest.raises(RuntimeError, match=r"bad configuration.*needs tls\.server\.certPath"):
        start_broker(broker_conf, "127.0.0.1:1", free_port())
