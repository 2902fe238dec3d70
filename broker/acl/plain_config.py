"""``plain_acl.yml``: RocketMQ 4.9's plain ACL file, read, checked and written.

::

    globalWhiteRemoteAddresses:
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms:
          - topicA=DENY
          - topicB=PUB|SUB
        groupPerms:
          - groupA=SUB

A file that does not parse, or holds an account RocketMQ would refuse (a key of 6 characters or
fewer, an unknown permission, a bad address pattern, one access key twice), is refused as a
whole with an ``AclConfigError`` naming the account and the field: the broker does not start on
it, and a running broker keeps its previous configuration. Where RocketMQ silently reads an
unknown permission as DENY, this refuses it, so a typo cannot lock or open anything unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from broker.common.acl_addresses import AddressPattern
from broker.common.acl_rules import (
    DEFAULT_PERMISSION,
    DENY,
    MAX_RESOURCES,
    MAX_WHITE_ADDRS,
    AclRuleError,
    check_admin_flag,
    check_count,
    check_default_permission,
    check_key,
    check_resource_entries,
    check_text,
    permission_of,
    split_addresses,
    split_entries,
    white_address_pattern,
)
from broker.common.acl_rules import check_white_addresses as _white_patterns
from broker.common.acl_signature import SigningKey
from broker.common.conf_file import ConfError
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX

MAX_ACCOUNTS = 10_000
MAX_FILE_BYTES = 8 * 1024 * 1024

T = TypeVar("T")


class AclConfigError(ConfError):
    """A plain_acl.yml (or an account sent to the broker) that cannot be used; says where and why."""


def _ruled(check: Callable[..., T], *args: Any) -> T:
    """A check of acl_rules, its refusal as the broker's AclConfigError."""
    try:
        return check(*args)
    except AclRuleError as exc:
        raise AclConfigError(str(exc)) from None


def group_resource(group: str) -> str:
    """Groups are kept under their retry topic's name, as RocketMQ keys them."""
    return RETRY_GROUP_TOPIC_PREFIX + group


@dataclass
class Account:
    """One account (RocketMQ's PlainAccessConfig), with its permissions parsed."""

    access_key: str
    secret_key: str
    white_remote_address: str = ""
    admin: bool = False
    default_topic_perm: str = DEFAULT_PERMISSION
    default_group_perm: str = DEFAULT_PERMISSION
    topic_perms: list[str] = field(default_factory=list)  # "topic=PERM", as in the file
    group_perms: list[str] = field(default_factory=list)
    # Derived when checked: resource (topic, or %RETRY%group) → permission bits.
    resources: dict[str, int] = field(default_factory=dict, repr=False)
    white: AddressPattern = field(default_factory=lambda: AddressPattern(""), repr=False)
    default_topic: int = DENY
    default_group: int = DENY
    signing_key: SigningKey | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # never the secret
        return f"Account(access_key={self.access_key!r}, admin={self.admin})"

    def to_json(self) -> dict[str, Any]:
        """As RocketMQ's PlainAccessConfig is written (the file, and the ACL-config answer)."""
        return {
            "accessKey": self.access_key,
            "secretKey": self.secret_key,
            "whiteRemoteAddress": self.white_remote_address,
            "admin": self.admin,
            "defaultTopicPerm": self.default_topic_perm,
            "defaultGroupPerm": self.default_group_perm,
            "topicPerms": list(self.topic_perms),
            "groupPerms": list(self.group_perms),
        }


@dataclass
class AclConfig:
    global_white_addresses: list[str] = field(default_factory=list)
    accounts: dict[str, Account] = field(default_factory=dict)  # by access key, in file order
    global_white: list[AddressPattern] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "globalWhiteRemoteAddresses": list(self.global_white_addresses),
            "accounts": [account.to_json() for account in self.accounts.values()],
        }

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_json(), sort_keys=False, allow_unicode=True)


def _text_list(value: Any, where: str, limit: int, split: Callable[[str], list[str]]) -> list[str]:
    """A list field: a YAML list, or one text (a single entry, or RocketMQ's comma-separated
    header text, split by ``split``)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = split(value)
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: expected a list")
    _ruled(check_count, value, limit, where)
    return [_ruled(check_text, v, where) for v in value]


def check_account(raw: dict[str, Any], where: str) -> Account:
    """An account from its file (or request) fields, checked; raises ``AclConfigError``."""
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: expected a mapping of the account's fields")
    access_key = _ruled(check_key, raw.get("accessKey"), f"{where} accessKey")
    where = f"account {access_key!r}"
    secret_key = _ruled(check_key, raw.get("secretKey"), f"{where} secretKey")
    account = Account(
        access_key,
        secret_key,
        _ruled(check_text, raw.get("whiteRemoteAddress"), f"{where} whiteRemoteAddress"),
        _ruled(check_admin_flag, raw.get("admin", False), f"{where} admin"),
        _ruled(check_default_permission, raw.get("defaultTopicPerm"), f"{where} defaultTopicPerm"),
        _ruled(check_default_permission, raw.get("defaultGroupPerm"), f"{where} defaultGroupPerm"),
        _text_list(raw.get("topicPerms"), f"{where} topicPerms", MAX_RESOURCES, split_entries),
        _text_list(raw.get("groupPerms"), f"{where} groupPerms", MAX_RESOURCES, split_entries),
    )
    account.signing_key = SigningKey(secret_key)
    account.default_topic = permission_of(account.default_topic_perm, "defaultTopicPerm")
    account.default_group = permission_of(account.default_group_perm, "defaultGroupPerm")
    topics = _ruled(check_resource_entries, account.topic_perms, f"{where} topicPerms")
    groups = _ruled(check_resource_entries, account.group_perms, f"{where} groupPerms")
    account.resources = {**topics, **{group_resource(g): p for g, p in groups.items()}}
    account.white = _ruled(white_address_pattern, account.white_remote_address, f"{where} whiteRemoteAddress")
    return account


def check_white_addresses(
    entries: list[str], where: str = "globalWhiteRemoteAddresses"
) -> list[AddressPattern]:
    return _ruled(_white_patterns, entries, where)


def build_config(global_white: list[str], accounts: list[Account]) -> AclConfig:
    config = AclConfig(list(global_white), {}, check_white_addresses(global_white))
    for account in accounts:
        if account.access_key in config.accounts:
            raise AclConfigError(f"account {account.access_key!r} appears twice")
        config.accounts[account.access_key] = account
    return config


def parse_acl_yaml(text: str | bytes) -> AclConfig:
    """The configuration a ``plain_acl.yml`` holds; raises ``AclConfigError`` saying what is wrong."""
    if len(text) > MAX_FILE_BYTES:
        raise AclConfigError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise AclConfigError(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise AclConfigError("expected a mapping with globalWhiteRemoteAddresses and accounts")
    white = _text_list(
        raw.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", MAX_WHITE_ADDRS, split_addresses
    )
    accounts_raw = raw.get("accounts") or []
    if not isinstance(accounts_raw, list):
        raise AclConfigError("accounts: expected a list")
    if len(accounts_raw) > MAX_ACCOUNTS:
        raise AclConfigError(f"accounts: more than {MAX_ACCOUNTS}")
    accounts = [check_account(a, f"accounts[{i}]") for i, a in enumerate(accounts_raw)]
    return build_config(white, accounts)
