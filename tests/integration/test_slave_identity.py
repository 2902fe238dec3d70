"""Issue 22, acceptance 5 (second half), with real processes: a slave whose brokerName,
brokerClusterName or haMasterAddress names another broker set's master is refused at start with
one line naming the key to fix, before it serves or registers (broker/server/slave_identity.py);
a correct slave starts and replicates, and a slave whose master is not up yet (or whose name
servers do not answer) starts with a warning and follows its master once it comes.

The first half (a slave refuses sends with RocketMQ's status) is
tests/integration/test_master_slave.py::test_a_slave_started_late_catches_up_and_refuses_writes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

from broker.client import Producer
from broker.common import fastjson
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.local_cluster import ROOT, free_port, start_broker, wait_until, write_conf
from broker.server.config import BrokerConfig
from broker.server.slave_identity import CheckSkipped, MasterRecord, _masters_listed, judge
from tests.cluster import HA_CLUSTER, MASTER_SLAVE, Cluster, add_slave

TOPIC = "identity-topic"


def _runtime(cluster: Cluster, addr: str) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=addr)
    assert response.ok, response.remark
    return json.loads(response.body)["table"]


def _ha_addr(cluster: Cluster, name: str) -> str:
    return f"127.0.0.1:{_runtime(cluster, cluster.brokers[name].addr)['haListenPort']}"


def _slave_conf(tmp_path, settings: dict) -> object:
    identity = {"brokerClusterName": HA_CLUSTER, "brokerId": 1, "brokerRole": "SLAVE",
                "storePathRootDir": tmp_path / "slave-store"}  # fmt: skip
    return write_conf(tmp_path / "slave.conf", {**MASTER_SLAVE.settings, **identity, **settings})


def _start_expecting_refusal(conf, namesrv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker.server", "-c", str(conf), "-n", namesrv,
         "--listen-port", str(free_port())],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


def _slave_ids(cluster: Cluster) -> dict[str, list[int]]:
    """Broker ids the name server lists per broker set."""
    response = cluster.request(RequestCode.GET_BROKER_CLUSTER_INFO, addr=cluster.namesrv_addr)
    table = fastjson.loads(response.body)["brokerAddrTable"]
    return {name: sorted(int(i) for i in data["brokerAddrs"]) for name, data in table.items()}


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory):
    """A name server and the masters of two broker sets, broker-a and broker-b."""
    cluster = Cluster(tmp_path_factory.mktemp("identity"), HA_CLUSTER)
    try:
        cluster.add_broker("broker-a", MASTER_SLAVE.settings)
        cluster.add_broker("broker-b", MASTER_SLAVE.settings)
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        # A brokerName nobody has, pointed at broker-a's master.
        ({"brokerName": "broker-x", "haMasterAddress": "{a}"},
         "haMasterAddress {a} is the HA port of broker-a's master (cluster HaCluster); this slave's "
         "brokerName is broker-x: fix brokerName or haMasterAddress"),
        # broker-b's slave pointed at broker-a's master (it would copy a foreign commit log).
        ({"brokerName": "broker-b", "haMasterAddress": "{a}"},
         "haMasterAddress {a} is the HA port of broker-a's master (cluster HaCluster); this slave's "
         "brokerName is broker-b: fix brokerName or haMasterAddress"),
        # broker-a's slave pointed at a port that is not its master's.
        ({"brokerName": "broker-a", "haMasterAddress": "{closed}"},
         "haMasterAddress {closed} is not the HA address of broker-a's master: the name servers list "
         "that master at {a_addr}, HA address {a}: fix haMasterAddress (or leave it empty to follow the "
         "name servers)"),
        # The right master in the wrong cluster.
        ({"brokerName": "broker-a", "brokerClusterName": "OtherCluster"},
         "broker-a's master at {a_addr} is in cluster HaCluster; this slave's brokerClusterName is "
         "OtherCluster: fix brokerClusterName (or brokerName)"),
        ({"brokerName": "broker-a", "brokerClusterName": "OtherCluster", "haMasterAddress": "{a}"},
         "haMasterAddress {a} is the HA port of broker-a's master (cluster HaCluster); this slave's "
         "brokerClusterName is OtherCluster: fix brokerClusterName or haMasterAddress"),
    ],
    ids=["unknown-name", "other-set", "wrong-address", "other-cluster", "other-cluster-address"],
)  # fmt: skip
def test_a_slave_of_another_broker_set_is_refused_at_start(two_sets, tmp_path, settings, line):
    names = {"a": _ha_addr(two_sets, "broker-a"), "a_addr": two_sets.brokers["broker-a"].addr,
             "closed": f"127.0.0.1:{free_port()}"}  # fmt: skip
    conf = _slave_conf(tmp_path, {k: str(v).format(**names) for k, v in settings.items()})
    finished = _start_expecting_refusal(conf, two_sets.namesrv_addr)
    assert finished.returncode == 2, finished.stderr
    refusals = [text for text in finished.stderr.splitlines() if text.startswith("broker: bad configuration")]
    assert refusals == [f"broker: bad configuration in {conf}: {line.format(**names)}"], finished.stderr
    assert "listening on" not in finished.stdout
    # It never served, so never registered: each set still lists its master alone.
    assert _slave_ids(two_sets) == {"broker-a": [0], "broker-b": [0]}


def _send(cluster: Cluster, count: int) -> None:
    producer = Producer("IDENTITY_PRODUCER", cluster.namesrv_addr).start()
    try:
        for i in range(count):
            assert producer.send(Message(TOPIC, f"m{i}".encode())).send_status == "SEND_OK"
    finally:
        producer.shutdown()


def _create_topic(cluster: Cluster, master: str) -> None:
    """On the master only: a slave refuses topic changes."""
    fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
              "topicFilterType": "SINGLE_TAG"}  # fmt: skip
    assert cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields, addr=master).ok
    cluster.wait_for_route(TOPIC)


def _caught_up(cluster: Cluster, master: str, slave: str) -> bool:
    end = _runtime(cluster, master)["commitLogMaxOffset"]
    return end != "0" and _runtime(cluster, slave)["commitLogMaxOffset"] == end


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_correct_slave_starts_and_replicates(tmp_path, host):
    """With haMasterAddress naming its master (by IP or by a name of this machine) the check
    passes and the slave copies the master's log."""
    cluster = Cluster(tmp_path, HA_CLUSTER)
    try:
        master = cluster.add_broker("broker-ha", MASTER_SLAVE.settings).addr
        ha_port = _runtime(cluster, master)["haListenPort"]
        slave = add_slave(cluster, "broker-ha", "broker-ha-s", {"haMasterAddress": f"{host}:{ha_port}"})
        assert not any("slave identity check" in text for text in slave.output), slave.output
        _create_topic(cluster, master)
        _send(cluster, 50)
        wait_until(lambda: _caught_up(cluster, master, slave.addr), timeout=60, what="the slave's copy")
    finally:
        cluster.stop()


def test_a_slave_started_before_its_master_follows_it_once_it_comes(tmp_path):
    """Nothing known under its brokerName and no conflicting master: the slave starts (as
    RocketMQ's), says so, suggests the close name of a master that is up, and replicates once
    its master registers."""
    cluster = Cluster(tmp_path, HA_CLUSTER)
    try:
        cluster.add_broker("broker-b", MASTER_SLAVE.settings)  # another set, whose name is close
        slave = add_slave(cluster, "broker-a", "broker-a-s")
        said = [text for text in slave.output if "slave identity check" in text]
        assert any("know no master under brokerName broker-a yet" in text for text in said), slave.output
        assert any("Did you mean brokerName broker-b?" in text for text in said), said
        master = cluster.add_broker("broker-a", MASTER_SLAVE.settings).addr
        _create_topic(cluster, master)
        _send(cluster, 50)
        wait_until(lambda: _caught_up(cluster, master, slave.addr), timeout=60, what="the late master's copy")
        assert _runtime(cluster, slave.addr)["masterAddr"] == master
    finally:
        cluster.stop()


class _SilentServer:
    """Accepts connections and never answers: a name server that hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_slave_whose_name_servers_do_not_answer_starts_with_a_warning(tmp_path):
    """Availability never depends on the check: a name server that is down, and one that
    accepts and never answers, cost a bounded wait and a warning."""
    silent = _SilentServer()
    try:
        closed = f"127.0.0.1:{free_port()}"
        conf = _slave_conf(tmp_path, {"brokerName": "broker-a"})
        slave = start_broker(conf, f"{closed};{silent.addr}", free_port())
        try:
            said = [text for text in slave.output if "slave identity check" in text]
            assert any(f"name server {silent.addr}: no answer within" in text for text in said), said
            assert any("not checked: no name server answered" in text for text in said), said
        finally:
            assert slave.stop() == 0
    finally:
        silent.close()


# -- the decision and the reading of answers, without processes -------------------------------
def _config(**settings: str) -> BrokerConfig:
    base = {"brokerName": "broker-a", "brokerClusterName": "C", "brokerId": "1", "brokerRole": "SLAVE"}
    return BrokerConfig.from_properties({**base, **settings})


def _same(a: str, b: str) -> bool | None:
    return a == b


def test_judge_refuses_only_what_it_is_sure_of():
    a = MasterRecord("broker-a", "10.0.0.1:10911", "C", "10.0.0.1:10912", asked=True)
    b = MasterRecord("broker-b", "10.0.0.2:10911", "C", "10.0.0.2:10912", asked=True)
    unread = MasterRecord("broker-a", "10.0.0.1:10911", "C", None, asked=True)
    assert judge(_config(haMasterAddress="10.0.0.1:10912"), [a, b], _same).refusal is None
    assert "fix brokerName" in (judge(_config(haMasterAddress="10.0.0.2:10912"), [a, b], _same).refusal or "")
    # Two name servers that disagree (one stale): the address must be one of the entries.
    stale = MasterRecord("broker-a", "10.0.0.7:10911", "C", "10.0.0.7:10912", asked=True)
    assert judge(_config(haMasterAddress="10.0.0.1:10912"), [stale, a, b], _same).refusal is None
    wrong = judge(_config(haMasterAddress="10.0.0.8:1"), [stale, a], _same)
    assert "fix haMasterAddress" in (wrong.refusal or "")
    # Settings not read, or hosts that cannot be compared: a warning, never a refusal.
    verdict = judge(_config(haMasterAddress="10.0.0.9:10912"), [unread], _same)
    assert verdict.refusal is None and any("could not read" in w for w in verdict.warnings)
    verdict = judge(_config(haMasterAddress="10.0.0.9:10912"), [a], lambda x, y: None)
    assert verdict.refusal is None and any("cannot tell" in w for w in verdict.warnings)
    # No master under its name: it starts, whatever else is up.
    verdict = judge(_config(brokerName="broker-c"), [a, b], _same)
    assert verdict.refusal is None and any(
        "know no master under brokerName broker-c" in w for w in verdict.warnings
    )


@pytest.mark.parametrize(
    "body",
    [b"", b"[]", b"not json", b'{"brokerAddrTable": 5}', b"[" * 100_000 + b"]" * 100_000,
     b'{"brokerAddrTable": {"x": {"cluster": 1, "brokerAddrs": {"0": "a:1"}}}}'],
)  # fmt: skip
def test_hostile_cluster_info_answers_are_refused_or_skipped(body):
    try:
        assert _masters_listed(body) == []
    except CheckSkipped:
        pass
    fastjson_body = (
        b'{"brokerAddrTable": {"a": {"cluster": "C", "brokerAddrs": {0: "h:1", 1: "h:2"}},'
        b' "b": {"cluster": "C", "brokerAddrs": {"0": "no port"}}}}'
    )
    listed = _masters_listed(fastjson_body)
    assert listed == [("a", "h:1", "C")]


def test_with_acl_the_check_signs_as_the_broker_or_warns(tmp_path):
    """Name server and master with plain ACL on: the check signs with the broker's own account
    (innerAccessKey, as its registration does) and refuses a slave of another set; without an
    account the master refuses to describe itself, and the slave starts with a warning."""
    from tests.acl.acl_cluster import ADMIN, start_acl_cluster

    acl = start_acl_cluster(tmp_path / "acl")
    try:
        info = acl.request(acl.admin, RequestCode.GET_BROKER_RUNTIME_INFO)
        ha = f"127.0.0.1:{json.loads(info.body)['table']['haListenPort']}"
        settings = {"brokerClusterName": "AclCluster", "brokerName": "broker-x", "haMasterAddress": ha}
        signed = {"innerAccessKey": ADMIN.access_key, "innerSecretKey": ADMIN.secret_key}
        finished = _start_expecting_refusal(_slave_conf(tmp_path, {**settings, **signed}), acl.namesrv_addr)
        assert finished.returncode == 2, finished.stderr
        assert "is the HA port of broker-acl's master (cluster AclCluster)" in finished.stderr

        slave = start_broker(_slave_conf(tmp_path, settings), acl.namesrv_addr, free_port())
        try:
            said = [text for text in slave.output if "slave identity check" in text]
            assert any("could not read the settings of the master(s)" in text for text in said), said
        finally:
            assert slave.stop() == 0
    finally:
        acl.stop()


def test_addresses_compare_by_ip_and_by_machine():
    import asyncio

    from broker.server.slave_identity import AddressBook

    book = AddressBook()
    names = ["localhost:10912", "127.0.0.1:10912", "192.0.2.1:10912"]  # no lookup leaves the machine
    try:
        asyncio.run(book.resolve(names))
    finally:
        book.close()
    assert book.same("localhost:10912", "127.0.0.1:10912") is True
    assert book.same("[::1]:10912", "127.0.0.1:10912") is True  # both this machine's
    assert book.same("127.0.0.1:10912", "127.0.0.1:10913") is False
    assert book.same("192.0.2.1:10912", "127.0.0.1:10912") is False  # TEST-NET: not this machine
    assert book.same("not-resolved.invalid:10912", "127.0.0.1:10912") is None  # cannot tell
