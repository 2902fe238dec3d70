"""mqadmin's ACL subcommands and its ACL credentials.

Without a server: usage errors name the bad value before anything is sent, and the credentials
come from the flags or the environment (never echoed). Against a real name server and two brokers
with ``aclEnable=true`` (each with its own plain_acl.yml holding an admin account): accounts
created, updated and deleted on the whole cluster show in the brokers' answers and files, the white
list is replaced, versions count the changes, a created account signs sends, and unsigned or
wrongly signed commands are refused with the broker's reason.
"""

from __future__ import annotations

import json

import pytest
import yaml

from broker.cli import main
from broker.cli_commands import all_commands
from broker.client import Producer, SessionCredentials
from broker.client.errors import MQBrokerError, MQClientError
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.local_cluster import wait_until
from tests.cluster import CLI, plain_acl, start_with_acl
from tests.cluster import CLI_CLUSTER as CLUSTER

ACL_COMMANDS = {
    "updateAclConfig",
    "deleteAclConfig",
    "updateGlobalWhiteAddr",
    "getAclConfig",
    "clusterAclConfigVersion",
}
UNREACHABLE = "127.0.0.1:1"
SECRET = "s3cret-never-shown"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_acl_subcommands_have_rocketmqs_names_and_flags(capsys):
    assert {c.name for c in all_commands()} >= ACL_COMMANDS
    code, out, _ = run(capsys, "help", "updateAclConfig")
    assert code == 0
    for flag in ("-b", "-c", "-a", "-s", "-w", "-i", "-u", "-t", "-g", "-m", "--access-key", "--secret-key"):
        assert flag in out


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["updateAclConfig", "-a", "RocketMQ2", "-s", "12345678"], "one of -b (broker address) or -c"),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "short", "-s", "12345678"],
            "accessKey: must have at least 7 characters",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "123"],
            "secretKey: must have at least 7 characters",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-i", "PUBSUB"],
            "defaultTopicPerm: 'PUBSUB' is not a permission",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-t", "topicA=ALL"],
            "topicPerms topicA: 'ALL' is not a permission",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-g", "groupA"],
            "groupPerms: 'groupA' is not name=PERM",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-m", "maybe"],
            "expected true or false",
        ),
        (["deleteAclConfig", "-b", UNREACHABLE, "-a", "a\tb c d e f"], "accessKey: not one line"),
        (
            ["updateGlobalWhiteAddr", "-b", UNREACHABLE, "-g", "10.10.*.*,../etc"],
            "'../etc' is not an IP address or address pattern",
        ),
        (["getAclConfig", "-b", UNREACHABLE, "-c", "SomeCluster"], "not allowed with argument"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_value(capsys, argv, reason):
    code, out, err = run(capsys, *argv)
    assert code == 2, err
    assert reason in err and out == ""


def test_a_secret_key_that_is_refused_is_not_echoed(capsys):
    code, _, err = run(capsys, "updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "bad\tsecret 1")
    assert code == 2 and "secretKey: not one line" in err
    assert "secret 1" not in err


def test_credentials_need_both_keys(capsys, monkeypatch):
    monkeypatch.delenv("ROCKETMQ_ACCESS_KEY", raising=False)
    monkeypatch.delenv("ROCKETMQ_SECRET_KEY", raising=False)
    code, _, err = run(capsys, "getAclConfig", "-b", UNREACHABLE, "--access-key", "operator1")
    assert code == 2 and "give --secret-key or set ROCKETMQ_SECRET_KEY" in err
    monkeypatch.setenv("ROCKETMQ_SECRET_KEY", SECRET)
    code, _, err = run(capsys, "getAclConfig", "-b", UNREACHABLE)
    assert code == 2 and "give --access-key or set ROCKETMQ_ACCESS_KEY" in err
    assert SECRET not in err


def test_an_unreachable_broker_fails_with_its_reason(capsys):
    code, out, err = run(capsys, "clusterAclConfigVersion", "-b", UNREACHABLE)
    assert code == 1 and out == ""
    assert f"cannot reach broker {UNREACHABLE} (connection refused)" in err


# -- against an ACL-enabled cluster ---------------------------------------------------------------

ADMIN_KEY, ADMIN_SECRET = "cli-admin-key", "cli-admin-secret"
PLAIN_ACL = plain_acl(SessionCredentials(ADMIN_KEY, ADMIN_SECRET))
APP_KEY, APP_SECRET = "cli-app-key", "cli-app-secret-1"


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    cluster = start_with_acl(CLI, tmp_path_factory.mktemp("acl-cli"), PLAIN_ACL)
    yield cluster
    cluster.stop()


@pytest.fixture
def as_admin(monkeypatch):
    monkeypatch.setenv("ROCKETMQ_ACCESS_KEY", ADMIN_KEY)
    monkeypatch.setenv("ROCKETMQ_SECRET_KEY", ADMIN_SECRET)


def acl_file(cluster, broker: str) -> dict:
    return yaml.safe_load((cluster.workdir / f"{broker}-plain_acl.yml").read_text())


def accounts_in_file(cluster, broker: str) -> dict[str, dict]:
    return {a["accessKey"]: a for a in acl_file(cluster, broker).get("accounts") or []}


def brokers_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)["brokers"]


def test_unsigned_and_wrongly_signed_commands_are_refused_with_the_brokers_reason(
    acl_cluster, capsys, monkeypatch
):
    monkeypatch.delenv("ROCKETMQ_ACCESS_KEY", raising=False)
    monkeypatch.delenv("ROCKETMQ_SECRET_KEY", raising=False)
    code, _, err = run(capsys, "getAclConfig", "-b", acl_cluster.broker_addr)
    assert code == 1 and "NO_PERMISSION (16)" in err and "no AccessKey" in err
    wrong = "not-the-secret-9"
    code, _, err = run(
        capsys,
        "getAclConfig",
        "-b",
        acl_cluster.broker_addr,
        "--access-key",
        ADMIN_KEY,
        "--secret-key",
        wrong,
    )
    assert code == 1 and "signature does not match" in err
    assert wrong not in err and ADMIN_SECRET not in err


def test_an_account_created_on_the_cluster_is_on_every_broker_and_signs_sends(acl_cluster, capsys, as_admin):
    n = acl_cluster.namesrv_addr
    before = {
        row["brokerAddr"]: row["aclConfigVersionNum"]
        for row in brokers_json(capsys, "clusterAclConfigVersion", "-n", n, "-c", CLUSTER)
    }
    code, out, err = run(
        capsys, "updateAclConfig", "-n", n, "-c", CLUSTER, "-a", APP_KEY, "-s", APP_SECRET,
        "-i", "DENY", "-u", "SUB", "-t", "AclCliTopic=PUB|SUB", "-g", "AclCliGroup=SUB",
    )  # fmt: skip
    assert code == 0, err
    assert out.count("create or update plain access config to") == 2 and APP_SECRET not in out
    listing = brokers_json(capsys, "getAclConfig", "-n", n, "-c", CLUSTER)
    assert len(listing) == 2
    for config in listing.values():
        account = next(a for a in config["accounts"] if a["accessKey"] == APP_KEY)
        assert account["secretKey"] == "******" and account["topicPerms"] == ["AclCliTopic=PUB|SUB"]
        assert account["defaultGroupPerm"] == "SUB" and account["admin"] is False
    for broker in CLI.brokers:
        written = accounts_in_file(acl_cluster, broker)[APP_KEY]
        assert written["secretKey"] == APP_SECRET and written["groupPerms"] == ["AclCliGroup=SUB"]
    after = {
        row["brokerAddr"]: row["aclConfigVersionNum"]
        for row in brokers_json(capsys, "clusterAclConfigVersion", "-n", n, "-c", CLUSTER)
    }
    assert all(after[addr] > before[addr] for addr in before)
    code, out, _ = run(capsys, "getAclConfig", "-n", n, "-c", CLUSTER)
    assert code == 0 and APP_SECRET not in out and ADMIN_SECRET not in out and "******" in out

    # The account works: a producer signing with it sends to its topic (created by the admin).
    assert (
        run(capsys, "updateTopic", "-n", n, "-c", CLUSTER, "-t", "AclCliTopic", "-r", "2", "-w", "2")[0] == 0
    )
    producer = Producer("AclCliProducer", n, credentials=SessionCredentials(APP_KEY, APP_SECRET)).start()
    try:
        result = wait_until(lambda: _try_send(producer, "AclCliTopic"), timeout=15, what="a signed send")
        assert result.send_status == "SEND_OK"
        with pytest.raises(
            MQClientError, match=r"NO_PERMISSION \(16\).*no PUB permission on topic AclCliOther"
        ):
            producer.send(Message("AclCliOtherTopic", b"denied"))  # its default topic permission: DENY
    finally:
        producer.shutdown()


def _try_send(producer, topic):
    try:
        return producer.send(Message(topic, b"signed"))
    except MQBrokerError as exc:
        if exc.code == ResponseCode.NO_PERMISSION:
            raise
        return None  # the route may not have settled yet


def test_an_update_keeps_what_it_leaves_out_and_delete_removes_the_account(acl_cluster, capsys, as_admin):
    addr = acl_cluster.broker_addr
    key = "cli-update-key"
    assert (
        run(
            capsys,
            "updateAclConfig",
            "-b",
            addr,
            "-a",
            key,
            "-s",
            "first-secret",
            "-w",
            "127.0.0.*",
            "-t",
            "T1=PUB",
        )[0]
        == 0
    )
    assert run(capsys, "updateAclConfig", "-b", addr, "-a", key, "-s", "second-secret", "-m", "true")[0] == 0
    written = accounts_in_file(acl_cluster, "broker-a")[key]
    assert written["secretKey"] == "second-secret" and written["admin"] is True
    assert written["whiteRemoteAddress"] == "127.0.0.*" and written["topicPerms"] == ["T1=PUB"]
    assert key not in accounts_in_file(acl_cluster, "broker-b")  # -b: that broker only

    code, out, err = run(capsys, "deleteAclConfig", "-b", addr, "-a", key)
    assert code == 0, err
    assert f"delete plain access config account to {addr} success." in out
    assert key not in accounts_in_file(acl_cluster, "broker-a")
    listing = brokers_json(capsys, "getAclConfig", "-b", addr)
    assert key not in {a["accessKey"] for a in listing[addr]["accounts"]}
    code, out, err = run(capsys, "deleteAclConfig", "-b", addr, "-a", key)
    assert code == 1 and f"FAILED on {addr}" in err and "no ACL account" in err


def test_a_cluster_change_that_some_brokers_refuse_names_each_brokers_outcome(acl_cluster, capsys, as_admin):
    """broker-b alone gets the account; deleting it from the cluster succeeds there and fails on
    broker-a, and the command says both."""
    n, key = acl_cluster.namesrv_addr, "cli-partial-key"
    addr_b = next(
        a
        for a in brokers_json(capsys, "getAclConfig", "-n", n, "-c", CLUSTER)
        if a != acl_cluster.broker_addr
    )
    assert run(capsys, "updateAclConfig", "-b", addr_b, "-a", key, "-s", "partial-secret")[0] == 0
    code, out, err = run(capsys, "deleteAclConfig", "-n", n, "-c", CLUSTER, "-a", key)
    assert code == 1 and out == ""
    assert f"delete plain access config account to {addr_b} success." in err
    assert f"FAILED on {acl_cluster.broker_addr}" in err
    assert key not in accounts_in_file(acl_cluster, "broker-b")


def test_the_global_white_list_is_replaced_on_every_broker(acl_cluster, capsys, as_admin):
    n = acl_cluster.namesrv_addr
    code, out, err = run(
        capsys, "updateGlobalWhiteAddr", "-n", n, "-c", CLUSTER, "-g", "10.10.103.*,192.168.0.{1,2}"
    )
    assert code == 0, err
    assert out.count("update global white remote addresses to") == 2
    for config in brokers_json(capsys, "getAclConfig", "-n", n, "-c", CLUSTER).values():
        assert config["globalWhiteAddrs"] == ["10.10.103.*", "192.168.0.{1,2}"]
    for broker in CLI.brokers:
        assert acl_file(acl_cluster, broker)["globalWhiteRemoteAddresses"] == [
            "10.10.103.*",
            "192.168.0.{1,2}",
        ]
    assert run(capsys, "updateGlobalWhiteAddr", "-n", n, "-c", CLUSTER, "-g", "")[0] == 0
    for config in brokers_json(capsys, "getAclConfig", "-n", n, "-c", CLUSTER).values():
        assert config["globalWhiteAddrs"] == []
