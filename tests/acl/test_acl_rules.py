"""One set of account rules (broker.common.acl_rules): the broker, reading an account, and the
admin client, checking one before it is sent, accept and refuse the same values with the same
words."""

from __future__ import annotations

import json

import pytest

from broker.acl import plain_config
from broker.acl.plain_config import AclConfigError, parse_acl_yaml
from broker.client.admin.acl import (
    AclInputError,
    PlainAccessConfig,
    check_account,
    check_addr_list,
    check_resource_perms,
    parse_addr_list,
)
from broker.common import acl_rules
from broker.common.broker_config_keys import SECRET_MASK

GOOD_SECRET = "12345678"

# (the account's fields as RocketMQ names them, the rule's words in both refusals)
BAD_ACCOUNTS = [
    ({"accessKey": "short"}, "accessKey: must have at least 7 characters"),
    ({"accessKey": "k" * 257}, "accessKey: not one line of at most 256 characters"),
    ({"accessKey": "tab\tinside"}, "accessKey: not one line"),
    ({"secretKey": "123456"}, "secretKey: must have at least 7 characters"),
    ({"secretKey": "line\nbreak1"}, "secretKey: not one line"),
    ({"defaultTopicPerm": "ALL"}, "defaultTopicPerm: 'ALL' is not a permission"),
    ({"defaultGroupPerm": "PUB SUB"}, "defaultGroupPerm: 'PUB SUB' is not a permission"),
    ({"topicPerms": ["topicA=READ"]}, "topicPerms topicA: 'READ' is not a permission"),
    ({"topicPerms": ["topicA"]}, "topicPerms: 'topicA' is not name=PERM"),
    ({"topicPerms": ["=SUB"]}, "topicPerms: '=SUB' is not name=PERM"),
    ({"groupPerms": ["g" * 256 + "=SUB"]}, "is not name=PERM"),
    ({"groupPerms": ["groupA=PUB=SUB"]}, "groupPerms groupA: 'PUB=SUB' is not a permission"),
    ({"topicPerms": [f"t{i}=SUB" for i in range(acl_rules.MAX_RESOURCES + 1)]}, "more than 10000 entries"),
    ({"whiteRemoteAddress": "1.2.3"}, "'1.2.3' is not an IP address or address pattern"),
    ({"whiteRemoteAddress": "999.1.*.*"}, "out of range"),
    ({"whiteRemoteAddress": "../../etc"}, "is not an IP address or address pattern"),
]


def _broker_fields(fields: dict) -> dict:
    return {"accessKey": "RocketMQ2", "secretKey": GOOD_SECRET, **fields}


def _client_account(fields: dict) -> PlainAccessConfig:
    raw = _broker_fields(fields)
    return PlainAccessConfig(
        access_key=raw["accessKey"],
        secret_key=raw["secretKey"],
        white_remote_address=raw.get("whiteRemoteAddress"),
        default_topic_perm=raw.get("defaultTopicPerm"),
        default_group_perm=raw.get("defaultGroupPerm"),
        topic_perms=raw.get("topicPerms"),
        group_perms=raw.get("groupPerms"),
    )


@pytest.mark.parametrize(("fields", "reason"), BAD_ACCOUNTS)
def test_the_broker_and_the_admin_client_refuse_an_account_with_the_same_words(fields, reason):
    with pytest.raises(AclConfigError) as broker_refusal:
        plain_config.check_account(_broker_fields(fields), "accounts[0]")
    with pytest.raises(AclInputError) as client_refusal:
        check_account(_client_account(fields))
    assert reason in str(broker_refusal.value)
    assert reason in str(client_refusal.value)
    assert GOOD_SECRET not in str(broker_refusal.value) + str(client_refusal.value)


def test_a_refused_secret_is_never_in_the_message():
    for secret in ("12345", "almost\tthe secret"):
        with pytest.raises(AclInputError) as caught:
            check_account(PlainAccessConfig("RocketMQ2", secret))
        assert secret not in str(caught.value)


def test_both_sides_take_permissions_in_any_case_and_the_client_sends_them_as_the_broker_writes():
    fields = {
        "defaultTopicPerm": "pub",
        "defaultGroupPerm": " sub|pub ",
        "topicPerms": ["topicA = pub|sub", "topicB=deny"],
        "groupPerms": ["groupA=Sub"],
        "whiteRemoteAddress": "192.168.1.{1,2}",
    }
    account = plain_config.check_account(_broker_fields(fields), "accounts[0]")
    assert account.default_topic == acl_rules.PUB and account.default_group == acl_rules.PUB | acl_rules.SUB
    assert account.resources == {
        "topicA": acl_rules.PUB | acl_rules.SUB,
        "topicB": acl_rules.DENY,
        "%RETRY%groupA": acl_rules.SUB,
    }
    assert account.white.matches("192.168.1.2") and not account.white.matches("192.168.1.3")

    sent = check_account(_client_account(fields))
    assert (sent.default_topic_perm, sent.default_group_perm) == ("PUB", "SUB|PUB")
    assert sent.topic_perms == ["topicA=PUB|SUB", "topicB=DENY"] and sent.group_perms == ["groupA=SUB"]
    assert sent.white_remote_address == "192.168.1.{1,2}"


def test_an_empty_default_permission_is_deny_on_both_sides():
    account = plain_config.check_account(_broker_fields({"defaultTopicPerm": ""}), "accounts[0]")
    assert account.default_topic_perm == "DENY" and account.default_topic == acl_rules.DENY
    assert check_account(_client_account({"defaultTopicPerm": ""})).default_topic_perm == "DENY"


def test_the_client_refuses_a_resource_name_the_comma_separated_request_cannot_carry():
    with pytest.raises(AclInputError, match="holds a comma"):
        check_resource_perms(["a,b=SUB"], "topicPerms")


def test_a_global_white_list_is_split_and_parsed_as_the_broker_does():
    text = "10.10.103.*, 192.168.1.{1,2},2001:db8::{1,2}"
    assert parse_addr_list(text) == ["10.10.103.*", "192.168.1.{1,2}", "2001:db8::{1,2}"]
    config = parse_acl_yaml(f"globalWhiteRemoteAddresses: '{text}'\n")
    assert config.global_white_addresses == parse_addr_list(text)
    for bad, reason in [("10.0.0.{1,x}", "not a number"), ("300.0.0.*", "out of range")]:
        with pytest.raises(AclInputError, match=reason):
            check_addr_list([bad])
        with pytest.raises(AclConfigError, match=reason):
            parse_acl_yaml(f"globalWhiteRemoteAddresses: ['{bad}']\n")
    too_many = [f"10.0.{i // 256}.{i % 256}" for i in range(acl_rules.MAX_WHITE_ADDRS + 1)]
    with pytest.raises(AclInputError, match="more than 1000 entries"):
        check_addr_list(too_many)
    with pytest.raises(AclConfigError, match="more than 1000 entries"):
        parse_acl_yaml(json.dumps({"globalWhiteRemoteAddresses": too_many}))  # JSON is YAML


def test_the_listing_mask_is_the_brokers_secret_mask():
    assert acl_rules.MASK == SECRET_MASK
    assert PlainAccessConfig("RocketMQ2", GOOD_SECRET).masked()["secretKey"] == SECRET_MASK
