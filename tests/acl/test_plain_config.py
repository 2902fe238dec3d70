"""plain_acl.yml checked whole, the file watcher, and the per-request check, in-process (the
processes' behaviour is in test_acl_broker.py / test_acl_namesrv.py)."""

from __future__ import annotations

import os

import orjson
import pytest

from broker.acl.acl_file import AclFile
from broker.acl.plain_config import AclConfigError, parse_acl_yaml
from broker.acl.validator import AclRefusal, check_request, host_of
from broker.common.acl_rules import split_addresses
from broker.common.acl_signature import SessionCredentials, sign_fields
from broker.common.codes import RequestCode as RC
from broker.remoting.command import RemotingCommand

GOOD = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def test_rocketmqs_sample_file_loads():
    config = parse_acl_yaml(GOOD)
    assert list(config.accounts) == ["RocketMQ", "rocketmq2"]
    account = config.accounts["RocketMQ"]
    assert account.secret_key == "12345678"  # a YAML number taken as the text written
    assert account.resources["%RETRY%groupB"] == 4 | 8 and account.resources["topicA"] == 1
    assert config.accounts["rocketmq2"].admin
    assert "secret" not in repr(account) and "12345678" not in repr(account)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("accounts: [this is: not yaml", "not valid YAML"),
        ("- a list", "expected a mapping"),
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "at least 7 characters"),
        ("accounts:\n  - accessKey: longenough\n", "secretKey: must have at least 7"),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: secret123, defaultTopicPerm: ALL}\n",
            "'ALL' is not",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: secret123, topicPerms: [t=READ]}\n",
            "'READ' is not",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: secret123, topicPerms: [noequals]}\n",
            "name=PERM",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: secret123, whiteRemoteAddress: 1.2.3}\n",
            "is not an IP address",
        ),
        ("globalWhiteRemoteAddresses: [999.1.*.*]\n", "out of range"),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: secret123}\n"
            "  - {accessKey: longenough, secretKey: secret456}\n",
            "appears twice",
        ),
    ],
)
def test_bad_files_are_refused_with_the_reason(text, reason):
    with pytest.raises(AclConfigError) as caught:
        parse_acl_yaml(text)
    assert reason in str(caught.value)


def test_acl_file_reload_keeps_the_last_good_configuration(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(GOOD)
    acl = AclFile(path)
    acl.load()
    first = acl.version_json()["counter"]
    assert not acl.reload()  # unchanged
    path.write_text("accounts: [broken")
    os.utime(path, ns=(1, 1))  # a distinct mtime even on a coarse clock
    assert not acl.reload() and "not valid YAML" in (acl.last_error or "")
    assert "RocketMQ" in acl.current.accounts
    path.write_text(GOOD.replace("rocketmq2", "rocketmq3"))
    assert acl.reload()
    assert "rocketmq3" in acl.current.accounts and acl.version_json()["counter"] == first + 1
    acl.write(acl.current)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert parse_acl_yaml(path.read_text()).accounts.keys() == acl.current.accounts.keys()


def test_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(AclConfigError, match="cannot read the ACL file"):
        AclFile(tmp_path / "absent.yml").load()


# -- the per-request check ----------------------------------------------------------------------
CONFIG = parse_acl_yaml(GOOD)
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")


def _signed(code, fields, creds=USER, body=b"") -> RemotingCommand:
    request = RemotingCommand(code=code, ext_fields=dict(fields), body=body)
    sign_fields(request.ext_fields, body, creds)
    return request


def _reason(request, host="127.0.0.1") -> str | None:
    try:
        check_request(CONFIG, request, host)
    except AclRefusal as exc:
        return str(exc)
    return None


def _refusal(request, host="127.0.0.1") -> str:
    """Why ``request`` is refused (it must be)."""
    reason = _reason(request, host)
    assert reason is not None, "the request was let through"
    return reason


def test_permissions_per_request_code():
    assert _reason(_signed(RC.SEND_MESSAGE, {"topic": "topicB"})) is None
    assert "no PUB permission on topic topicC" in _refusal(_signed(RC.SEND_MESSAGE, {"topic": "topicC"}))
    assert "no PUB permission on topic topicA" in _refusal(_signed(RC.SEND_MESSAGE_V2, {"b": "topicA"}))
    assert "no PUB permission on topic other" in _refusal(_signed(RC.SEND_BATCH_MESSAGE, {"topic": "other"}))
    # A send to a retry topic is its group's SUB (groupB may, groupA is denied).
    assert _reason(_signed(RC.SEND_MESSAGE, {"topic": "%RETRY%groupB"})) is None
    assert "on group groupA" in _refusal(_signed(RC.SEND_MESSAGE, {"topic": "%RETRY%groupA"}))
    pull = {"topic": "topicC", "consumerGroup": "groupB"}
    assert _reason(_signed(RC.PULL_MESSAGE, pull)) is None
    assert "group groupA" in _refusal(_signed(RC.PULL_MESSAGE, {**pull, "consumerGroup": "groupA"}))
    assert _reason(_signed(RC.PULL_MESSAGE, {**pull, "consumerGroup": "anyOther"})) is None  # default SUB
    back = {"group": "groupB", "originTopic": "topicC"}
    assert "no PUB permission on topic topicC" in _refusal(_signed(RC.CONSUMER_SEND_MSG_BACK, back))
    locks = orjson.dumps({"consumerGroup": "groupB", "mqSet": [{"topic": "topicA"}]})
    assert "no SUB permission on topic topicA" in _refusal(_signed(RC.LOCK_BATCH_MQ, {}, body=locks))
    not_json = _signed(RC.HEART_BEAT, {}, body=b"\x00not json")
    assert "is not JSON" in _refusal(not_json)


def test_admin_codes_and_admin_accounts():
    create = {"topic": "x"}
    assert "needs an admin account" in _refusal(_signed(RC.UPDATE_AND_CREATE_TOPIC, create))
    assert _reason(_signed(RC.UPDATE_AND_CREATE_TOPIC, create, ADMIN), host="192.168.1.5") is None
    # An admin without permission entries may use any topic.
    assert _reason(_signed(RC.SEND_MESSAGE, {"topic": "topicA"}, ADMIN)) is None


def test_white_addresses():
    unsigned = RemotingCommand(code=RC.GET_MAX_OFFSET, ext_fields={"topic": "t", "queueId": "0"})
    assert _reason(unsigned, host="10.10.103.7") is None  # global white list: anything goes
    assert "no AccessKey" in _refusal(unsigned)
    with_key = RemotingCommand(code=RC.GET_MAX_OFFSET, ext_fields={"AccessKey": "rocketmq2"})
    assert _reason(with_key, host="192.168.1.9") is None  # the account's white address
    assert "signature does not match" in _refusal(with_key, host="192.168.2.9")


def test_host_of_connection_addresses():
    assert host_of("10.0.0.1:1234") == "10.0.0.1"
    assert host_of("[::1]:1234") == "::1"


def test_split_addresses_keeps_choices_whole():
    assert split_addresses("10.0.0.*, 192.168.1.{1,2},") == ["10.0.0.*", "192.168.1.{1,2}"]
    assert split_addresses("") == []
