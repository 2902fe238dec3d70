"""mqadmin's controller-mode commands as an operator runs them (subprocesses), against real
controllers: a standalone group of three (followers answer by following the leader) and a name
server embedding one with ACL on; getBrokerEpoch against brokers registered in that name server
(scripted servers answering RocketMQ's EpochEntryCache body, to pin the labels and the open
epoch's end) and against a real broker in controller mode whose controller is embedded in the
name server. Output and exit codes are checked, failures included: an unreachable controller, no
leader, an unknown broker set, a refused switchover, a missing admin account."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import orjson
import pytest
import yaml

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.epoch_entries import EpochEntry, EpochEntryCache
from broker.local_cluster import ROOT, SMALL_STORE, LocalCluster, free_port, wait_until
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from tests.cli.fake_server import FakeServer, error, ok
from tests.controller.embedded import controller_settings, start_embedded_namesrv
from tests.controller.wire import ControllerGroup, SimulatedBrokers, Wire

NAME = "broker-ctl"
ADMIN = SessionCredentials("cli-ctl-admin", "cli-ctl-admin-secret")
USER = SessionCredentials("cli-ctl-user", "cli-ctl-user-secret")


def mqadmin(*argv: str, keys: SessionCredentials | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETMQ_", "NAMESRV_ADDR"))}
    env["PYTHONPATH"] = str(ROOT)
    if keys is not None:
        env["ROCKETMQ_ACCESS_KEY"], env["ROCKETMQ_SECRET_KEY"] = keys.access_key, keys.secret_key
    return subprocess.run(
        [sys.executable, "-m", "broker.cli", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def in_sync_set(wire: Wire, brokers: SimulatedBrokers) -> None:
    """Broker 1 master, broker 2 in its in-sync set (as a master reports a caught-up slave)."""
    for bid in brokers.ids:
        registered = brokers.register(bid)
        assert registered is not None and registered.ok, registered
    wait_until(lambda: wire.replica_info(NAME) is not None, timeout=20, what="a master")
    master, epoch, _ = wire.replica_info(NAME) or (None, 0, [])
    assert master == 1
    altered = brokers.alter_sync_state_set(1, epoch, [1, 2], 1)
    assert altered is not None and altered.ok, altered


# ---- a standalone group of three ----


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    controllers = ControllerGroup(tmp_path_factory.mktemp("cli-ctl"), size=3)
    controllers.start()
    wire = Wire(controllers)
    brokers = SimulatedBrokers(wire, NAME, [1, 2])
    try:
        wait_until(lambda: wire.leader() is not None, timeout=30, what="a controller leader")
        brokers.start()
        in_sync_set(wire, brokers)
        yield controllers, wire
    finally:
        brokers.stop()
        wire.close()
        controllers.stop()


def _identity(bid: int) -> str:
    """RocketMQ's ReplicaIdentity.toString() of a live simulated broker."""
    address = f"127.0.0.1:{20000 + bid}"
    return f"ReplicaIdentity{{brokerName='{NAME}', brokerId={bid}, brokerAddress='{address}', alive=true}}"


def _follower(controllers: ControllerGroup, wire: Wire) -> str:
    leader = wire.leader()
    return next(controllers.listen[pid] for pid in controllers.listen if pid != leader)


def test_get_controller_metadata_names_the_group_and_its_leader(group):
    controllers, wire = group
    leader = wire.leader()
    assert leader is not None
    done = mqadmin("getControllerMetaData", "-a", _follower(controllers, wire))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "#ControllerGroup\ttest-group",
        f"#ControllerLeaderId\t{leader}",
        f"#ControllerLeaderAddress\t{controllers.listen[leader]}",
    ]
    assert lines[3:] == [f"#Peer:\t{pid}-{addr}" for pid, addr in controllers.listen.items()]


def test_get_sync_state_set_from_a_follower_follows_the_leader(group):
    controllers, wire = group
    done = mqadmin("getSyncStateSet", "-a", _follower(controllers, wire), "-b", NAME)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"#brokerName\t{NAME}",
        "#MasterBrokerId\t1",
        "#MasterAddr\t127.0.0.1:20001",
        "#MasterEpoch\t1",
        "#SyncStateSetEpoch\t2",
        "#SyncStateSetNums\t2",
        f"InSyncReplica:\t{_identity(1)}",
        f"InSyncReplica:\t{_identity(2)}",
    ]
    as_json = json.loads(mqadmin("getSyncStateSet", "-a", controllers.listen["n0"], "--json").stdout)
    assert as_json[NAME]["master_id"] == 1 and [r["broker_id"] for r in as_json[NAME]["in_sync"]] == [1, 2]


def test_elect_master_switches_over_and_refusals_exit_1(group):
    controllers, wire = group
    addresses = ";".join(controllers.listen.values())
    done = mqadmin("electMaster", "-a", addresses, "-c", "c", "-bn", NAME, "-b", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "#ClusterName\tc",
        f"#BrokerName\t{NAME}",
        "#BrokerMasterAddr\t127.0.0.1:20002",
        "#MasterEpoch\t2",
        "#SyncStateSetEpoch\t3",
        "\t#Broker\t1\t127.0.0.1:20001",
        "\t#Broker\t2\t127.0.0.1:20002",
    ]
    assert wire.replica_info(NAME) == (2, 2, [2])  # RocketMQ: the new master's set is itself
    # A broker that is not in the in-sync set, and a broker set the controller does not know.
    refused = mqadmin("electMaster", "-a", addresses, "-c", "c", "-bn", NAME, "-b", "1")
    assert refused.returncode == 1
    assert "answered CONTROLLER_ELECT_MASTER_FAILED (2012)" in refused.stderr, refused.stderr
    unknown = mqadmin("electMaster", "-a", addresses, "-c", "c", "-bn", "no-such-set", "-b", "1")
    assert unknown.returncode == 1
    assert "CONTROLLER_BROKER_METADATA_NOT_EXIST (2008): no broker set no-such-set" in unknown.stderr
    missing = mqadmin("getSyncStateSet", "-a", addresses, "-b", f"{NAME};no-such-set")
    assert missing.returncode == 1
    assert "the controller knows no broker set no-such-set" in missing.stderr
    usage = mqadmin("electMaster", "-a", addresses, "-c", "c", "-b", "1")
    assert usage.returncode == 2 and "-bn/--brokerName" in usage.stderr


def test_an_unreachable_controller_or_no_leader_exits_1():
    dead = f"127.0.0.1:{free_port()}"
    for command in (
        ["getControllerMetaData"],
        ["getSyncStateSet"],
        ["electMaster", "-c", "c", "-bn", NAME, "-b", "1"],
    ):
        done = mqadmin(*command, "-a", dead)
        assert done.returncode == 1, (command, done.stdout)
        assert f"cannot reach controller {dead}" in done.stderr, done.stderr
    # A controller that knows no leader (its group lost its quorum): said so, exit 1.
    lost = FakeServer()
    lost.on(RC.CONTROLLER_GET_METADATA_INFO, lambda ext, body: ok(group="g", isLeader="false"))
    lost.on(
        RC.CONTROLLER_GET_SYNC_STATE_DATA, lambda ext, body: error(ResponseCode.CONTROLLER_NOT_LEADER, "no")
    )
    try:
        done = mqadmin("getSyncStateSet", "-a", lost.addr)
        assert done.returncode == 1
        assert "no controller leader known" in done.stderr, done.stderr
        meta = mqadmin("getControllerMetaData", "-a", lost.addr)
        assert meta.returncode == 0 and "#ControllerLeaderId\t-" in meta.stdout
    finally:
        lost.close()


def test_get_and_update_controller_config(group):
    controllers, _ = group
    addresses = list(controllers.listen.values())
    done = mqadmin("getControllerConfig", "-a", ";".join(addresses[:2]))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("====")] == [
        f"============{a}============" for a in addresses[:2]
    ]
    assert f"{'scanNotActiveBrokerInterval':<50}=  100" in lines
    assert f"{'controllerDLegerGroup':<50}=  test-group" in lines

    updated = mqadmin(
        "updateControllerConfig", "-a", ";".join(addresses), "-k", "enableElectUncleanMaster", "-v", "true"
    )
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.splitlines() == [
        f"update controller config success![{', '.join(addresses)}]",
        "enableElectUncleanMaster : true",
    ]
    after = json.loads(mqadmin("getControllerConfig", "-a", ";".join(addresses), "--json").stdout)
    assert [after[a]["enableElectUncleanMaster"] for a in addresses] == ["true"] * 3
    back = mqadmin(
        "updateControllerConfig", "-a", ";".join(addresses), "-k", "enableElectUncleanMaster", "-v", "false"
    )
    assert back.returncode == 0, back.stderr

    for key, value, wanted in (
        ("listenPort", "1", "NO_PERMISSION (16): listenPort cannot be changed while the controller runs"),
        ("noSuchKey", "1", "CONTROLLER_INVALID_REQUEST (2005): 'noSuchKey' is not a controller setting"),
        (
            "scanNotActiveBrokerInterval",
            "soon",
            "CONTROLLER_INVALID_REQUEST (2005): scanNotActiveBrokerInterval",
        ),
    ):
        refused = mqadmin("updateControllerConfig", "-a", addresses[0], "-k", key, "-v", value)
        assert refused.returncode == 1 and wanted in refused.stderr, refused.stderr


# ---- a name server embedding a controller, ACL on ----


class _OneAddress:
    """What SimulatedBrokers needs of a controller group: the name server is the only one."""

    def __init__(self, addr: str) -> None:
        self.listen = {"ns": addr}

    def running(self) -> list[str]:
        return ["ns"]


def _epoch_server(broker_id: int, entries: tuple[EpochEntry, ...], max_offset: int) -> FakeServer:
    server = FakeServer()
    body = EpochEntryCache("c", NAME, broker_id, entries, max_offset).encode()
    server.on(RC.GET_BROKER_EPOCH_CACHE, lambda ext, body_in: ok(body))
    return server


def _register(client: SyncRemotingClient, namesrv: str, broker_id: int, addr: str) -> None:
    body = {
        "topicConfigSerializeWrapper": {"topicConfigTable": {}, "dataVersion": {"timestamp": 1, "counter": 1}}
    }
    header = {"brokerName": NAME, "brokerAddr": addr, "clusterName": "c", "haServerAddr": "",
              "brokerId": broker_id, "compressed": False}  # fmt: skip
    reply = client.invoke(namesrv, create_request(RC.REGISTER_BROKER, header, orjson.dumps(body)))
    assert reply.ok, reply.remark


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-ctl-ns")
    acl_file = root / "acl.yml"
    accounts = [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {"accessKey": USER.access_key, "secretKey": USER.secret_key},
    ]
    acl_file.write_text(yaml.safe_dump({"accounts": accounts}))
    namesrv = start_embedded_namesrv(
        root, aclEnable="true", aclFilePath=acl_file, controllerRaftPassword="raft-secret-not-shown"
    )
    shim = _OneAddress(namesrv.addr)
    wire = Wire(shim)  # type: ignore[arg-type]
    wire.client.close()
    wire.client = SyncRemotingClient(ADMIN)
    brokers = SimulatedBrokers(wire, NAME, [1, 2])
    brokers._client.close()
    brokers._client = SyncRemotingClient(ADMIN)
    # The brokers as the name server lists them: scripted servers answering the epoch cache.
    master = _epoch_server(1, (EpochEntry(1, 0, 500), EpochEntry(2, 500)), 800)
    slave = _epoch_server(2, (EpochEntry(1, 0, 500), EpochEntry(2, 500)), 640)
    registrar = SyncRemotingClient(ADMIN)  # the name server forgets brokers whose connection closes
    try:
        wait_until(lambda: wire.leader() is not None, timeout=30, what="the embedded controller to lead")
        brokers.start()
        in_sync_set(wire, brokers)
        _register(registrar, namesrv.addr, 0, master.addr)
        _register(registrar, namesrv.addr, 1, slave.addr)
        yield namesrv.addr, wire, (master, slave)
    finally:
        brokers.stop()
        wire.close()
        registrar.close()
        master.close()
        slave.close()
        namesrv.stop()


def test_embedded_controller_answers_on_the_name_servers_port(embedded):
    addr, _, _ = embedded
    meta = mqadmin("getControllerMetaData", "-a", addr)  # open to anyone
    assert meta.returncode == 0, meta.stderr
    assert meta.stdout.splitlines() == [
        "#ControllerGroup\tembedded-group",
        "#ControllerLeaderId\tn0",
        f"#ControllerLeaderAddress\t{addr}",
        f"#Peer:\tn0-{addr}",
    ]
    # -c: the broker sets of a cluster, from the name server; replica reads need a signature.
    unsigned = mqadmin("getSyncStateSet", "-a", addr, "-n", addr, "-c", "c")
    assert unsigned.returncode == 1 and "NO_PERMISSION" in unsigned.stderr, unsigned.stderr
    signed = mqadmin("getSyncStateSet", "-a", addr, "-n", addr, "-c", "c", keys=USER)
    assert signed.returncode == 0, signed.stderr
    assert signed.stdout.splitlines()[:2] == [f"#brokerName\t{NAME}", "#MasterBrokerId\t1"]
    unknown = mqadmin("getSyncStateSet", "-a", addr, "-n", addr, "-c", "no-such-cluster", keys=USER)
    assert unknown.returncode == 1 and "no-such-cluster" in unknown.stderr


def test_elect_master_on_the_embedded_controller_needs_an_admin_account(embedded):
    addr, wire, _ = embedded
    command = ("electMaster", "-a", addr, "-c", "c", "-bn", NAME, "-b", "2")
    anonymous = mqadmin(*command)
    assert (
        anonymous.returncode == 1
        and "NO_PERMISSION" in anonymous.stderr
        and "no AccessKey" in anonymous.stderr
    )
    user = mqadmin(*command, keys=USER)
    assert user.returncode == 1 and "needs an admin account" in user.stderr
    assert wire.replica_info(NAME)[0] == 1  # nothing changed
    done = mqadmin(*command, keys=ADMIN)
    assert done.returncode == 0, done.stderr
    assert "#BrokerMasterAddr\t127.0.0.1:20002" in done.stdout.splitlines()
    wait_until(lambda: (wire.replica_info(NAME) or (None,))[0] == 2, timeout=10, what="broker 2 as master")


def test_get_broker_epoch_by_name_cluster_and_address(embedded):
    addr, _, (master, slave) = embedded
    by_name = mqadmin("getBrokerEpoch", "-n", addr, "-b", NAME)
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.split("\n\n") == [
        "\n".join(
            [
                "#clusterName\tc",
                f"#brokerName\t{NAME}",
                f"#brokerAddr\t{master.addr}",
                "#brokerId\t1",
                "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=500}",
                "#Epoch: EpochEntry{epoch=2, startOffset=500, endOffset=800}",  # open: the max offset
            ]
        ),
        "\n".join(
            [
                "#clusterName\tc",
                f"#brokerName\t{NAME}",
                f"#brokerAddr\t{slave.addr}",
                "#brokerId\t2",
                "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=500}",
                "#Epoch: EpochEntry{epoch=2, startOffset=500, endOffset=640}\n",
            ]
        ),
    ]
    by_cluster = mqadmin("getBrokerEpoch", "-n", addr, "-c", "c", "--json")
    assert by_cluster.returncode == 0, by_cluster.stderr
    caches = [b["cache"] for b in json.loads(by_cluster.stdout)["brokers"]]
    assert [(c["broker_id"], c["max_offset"]) for c in caches] == [(1, 800), (2, 640)]
    one = mqadmin("getBrokerEpoch", "-b", slave.addr)  # an address: no name server needed
    assert one.returncode == 0 and f"#brokerAddr\t{slave.addr}" in one.stdout
    # Failures: an unknown brokerName, a broker that does not answer, one that refuses.
    assert "no broker named 'nope'" in mqadmin("getBrokerEpoch", "-n", addr, "-b", "nope").stderr
    dead = mqadmin("getBrokerEpoch", "-b", f"127.0.0.1:{free_port()}")
    assert dead.returncode == 1 and "cannot reach broker" in dead.stderr
    refusing = FakeServer()  # a broker without the request (not in controller mode, older)
    try:
        refused = mqadmin("getBrokerEpoch", "-b", refusing.addr)
        assert refused.returncode == 1 and "REQUEST_CODE_NOT_SUPPORTED" in refused.stderr
    finally:
        refusing.close()
    usage = mqadmin("getBrokerEpoch", "-n", addr)
    assert usage.returncode == 2


# ---- a real broker in controller mode, its controller embedded in the name server ----


def test_a_real_broker_in_controller_mode_seen_through_the_embedded_controller(tmp_path):
    cluster = LocalCluster(tmp_path, "RealCtl", namesrv_settings=controller_settings(tmp_path))
    wire = Wire(_OneAddress(cluster.namesrv_addr))  # type: ignore[arg-type]
    try:
        broker = cluster.add_broker(
            "broker-real",
            {
                **SMALL_STORE,
                "enableControllerMode": "true",
                "controllerAddr": cluster.namesrv_addr,
                "brokerHeartbeatInterval": 200,
                "controllerHeartBeatTimeoutMills": 1500,
            },
        )
        wait_until(
            lambda: (wire.replica_info("broker-real") or (None,))[0] is not None,
            timeout=30,
            what="the controller to elect the broker",
        )
        master_id = wire.replica_info("broker-real")[0]  # type: ignore[index]
        state = mqadmin("getSyncStateSet", "-a", cluster.namesrv_addr, "-b", "broker-real")
        assert state.returncode == 0, state.stderr
        assert state.stdout.splitlines()[:4] == [
            "#brokerName\tbroker-real",
            f"#MasterBrokerId\t{master_id}",
            f"#MasterAddr\t{broker.addr}",
            "#MasterEpoch\t1",
        ]

        def epochs() -> subprocess.CompletedProcess | None:
            # The broker registers with the name server once it knows its role.
            done = mqadmin("getBrokerEpoch", "-n", cluster.namesrv_addr, "-c", "RealCtl")
            return done if done.returncode == 0 and "#Epoch:" in done.stdout else None

        done = wait_until(epochs, timeout=30, what="the broker's epoch cache through the name server")
        lines = done.stdout.splitlines()
        assert lines[:4] == [
            "#clusterName\tRealCtl",
            "#brokerName\tbroker-real",
            f"#brokerAddr\t{broker.addr}",
            f"#brokerId\t{master_id}",
        ]
        assert lines[4].startswith("#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset="), lines
    finally:
        wire.close()
        cluster.stop()


def test_controller_config_on_the_name_server_needs_an_admin_and_hides_the_raft_password(embedded):
    addr, _, _ = embedded
    refused = mqadmin("getControllerConfig", "-a", addr, keys=USER)
    assert refused.returncode == 1 and "needs an admin account" in refused.stderr
    done = mqadmin("getControllerConfig", "-a", addr, keys=ADMIN)
    assert done.returncode == 0, done.stderr
    assert f"{'listenPort':<50}=  {addr.rsplit(':', 1)[1]}" in done.stdout.splitlines()
    assert f"{'controllerRaftPassword':<50}=  ******" in done.stdout.splitlines()
    assert "raft-secret-not-shown" not in done.stdout


def test_a_standalone_controller_with_acl_checks_like_the_name_server(tmp_path):
    acl_file = tmp_path / "acl.yml"
    acl_file.write_text(
        yaml.safe_dump(
            {"accounts": [{"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True}]}
        )
    )
    controllers = ControllerGroup(tmp_path, size=1, extra={"aclEnable": "true", "aclFilePath": acl_file})
    controllers.start()
    addr = controllers.listen["n0"]
    wire = Wire(controllers)
    try:
        wait_until(lambda: wire.leader() is not None, timeout=30, what="the controller to lead")
        meta = mqadmin("getControllerMetaData", "-a", addr)  # open
        assert meta.returncode == 0 and f"#Peer:\tn0-{addr}" in meta.stdout, meta.stderr
        refused = mqadmin("getSyncStateSet", "-a", addr)
        assert (
            refused.returncode == 1 and "NO_PERMISSION" in refused.stderr and "no AccessKey" in refused.stderr
        )
        elect = ("electMaster", "-a", addr, "-c", "c", "-bn", NAME, "-b", "1")
        assert "NO_PERMISSION" in mqadmin(*elect).stderr
        # Signed by the admin, the request reaches the controller (which knows no such set).
        signed = mqadmin(*elect, keys=ADMIN)
        assert signed.returncode == 1 and "CONTROLLER_BROKER_METADATA_NOT_EXIST" in signed.stderr, (
            signed.stderr
        )
        assert mqadmin("getSyncStateSet", "-a", addr, keys=ADMIN).returncode == 0
    finally:
        wire.close()
        controllers.stop()


def test_a_controller_mode_broker_signs_its_controller_requests(tmp_path):
    """With ACL on the name server embedding the controller, every request a broker makes to the
    controller (id, heartbeat, registration, election) needs an admin account: a broker with
    innerAccessKey/innerSecretKey of one is elected, one without keys is refused and takes no
    role."""
    acl_file = tmp_path / "acl.yml"
    accounts = [{"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True}]
    acl_file.write_text(yaml.safe_dump({"accounts": accounts}))
    settings = controller_settings(tmp_path, aclEnable="true", aclFilePath=acl_file)
    cluster = LocalCluster(tmp_path, "SignedCtl", namesrv_settings=settings)
    controller_mode = {
        **SMALL_STORE,
        "enableControllerMode": "true",
        "controllerAddr": cluster.namesrv_addr,
        "brokerHeartbeatInterval": 200,
        "controllerHeartBeatTimeoutMills": 1500,
    }
    try:
        signed = cluster.add_broker(
            "broker-signed",
            {**controller_mode, "innerAccessKey": ADMIN.access_key, "innerSecretKey": ADMIN.secret_key},
        )
        unsigned = cluster.add_broker("broker-unsigned", {**controller_mode, "listenPort": free_port()})

        def elected(name: str) -> subprocess.CompletedProcess | None:
            done = mqadmin("getSyncStateSet", "-a", cluster.namesrv_addr, "-b", name, keys=ADMIN)
            named = "#MasterBrokerId\t" in done.stdout and "#MasterBrokerId\t-" not in done.stdout
            return done if done.returncode == 0 and named else None  # "-": the set, no master yet

        done = wait_until(lambda: elected("broker-signed"), timeout=30, what="the signed broker's election")
        assert f"#MasterAddr\t{signed.addr}" in done.stdout

        # The unsigned broker never got an id: the controller knows no such set, and the broker
        # says why in its runtime info while it keeps running, retrying and refusing writes.
        def refused() -> dict[str, str] | None:
            response = cluster.request(RC.GET_BROKER_RUNTIME_INFO, addr=unsigned.addr)
            info = json.loads(response.body)["table"] if response.ok else {}
            return info if "NO_PERMISSION" in info.get("controllerLastError", "") else None

        info = wait_until(refused, timeout=30, what="the unsigned broker's refusal")
        assert info["controllerBrokerId"] == "" and info["brokerRole"] != "SYNC_MASTER", info
        assert elected("broker-unsigned") is None
        assert unsigned.proc.poll() is None
    finally:
        cluster.stop()
