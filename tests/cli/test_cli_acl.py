"""mqadmin's ACL subcommands and its ACL credentials.

Without a server: usage errors name the bad value before anything is sent, and the credentials
come from the flags or the environment (never echoed).
"""

from __future__ import annotations

import pytest

from broker.cli import main
from broker.cli_commands import all_commands

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
            "an access key is 7 to 256",
        ),
        (["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "123"], "a secret key is 7 to 256"),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-i", "PUBSUB"],
            "defaultTopicPerm: 'PUBSUB' is not a permission",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-t", "topicA=ALL"],
            "topic permission 'topicA=ALL': 'ALL' is not a permission",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-g", "groupA"],
            "group permission 'groupA' is not name=PERM",
        ),
        (
            ["updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "12345678", "-m", "maybe"],
            "expected true or false",
        ),
        (["deleteAclConfig", "-b", UNREACHABLE, "-a", "a b c d e f"], "an access key has no spaces"),
        (
            ["updateGlobalWhiteAddr", "-b", UNREACHABLE, "-g", "10.10.*.*,../etc"],
            "'../etc' is not an address",
        ),
        (["getAclConfig", "-b", UNREACHABLE, "-c", "SomeCluster"], "not allowed with argument"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_value(capsys, argv, reason):
    code, out, err = run(capsys, *argv)
    assert code == 2, err
    assert reason in err and out == ""


def test_a_secret_key_that_is_refused_is_not_echoed(capsys):
    code, _, err = run(capsys, "updateAclConfig", "-b", UNREACHABLE, "-a", "RocketMQ2", "-s", "bad secret 1")
    assert code == 2 and "a secret key has no spaces" in err
    assert "bad secret 1" not in err


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
