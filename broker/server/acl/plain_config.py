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

from dataclasses import dataclass, field
from typing import Any

import yaml

from broker.common.acl_signature import SigningKey
from broker.common.conf_file import ConfError
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX

from .addresses import AddressPattern, AddressPatternError

# Permission bits as RocketMQ's Permission class holds them.
DENY, ANY, PUB, SUB = 1, 2, 4, 8
PERMISSIONS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
KEY_MIN_LENGTH = 7  # RocketMQ refuses keys of 6 characters or fewer
KEY_MAX_LENGTH = 256
MAX_ACCOUNTS = 10_000
MAX_RESOURCES = 10_000  # per account and kind
MAX_FILE_BYTES = 8 * 1024 * 1024


class AclConfigError(ConfError):
    """A plain_acl.yml (or an account sent to the broker) that cannot be used; says where and why."""


def permission_of(text: Any, where: str) -> int:
    perm = PERMISSIONS.get(str(text).strip().upper()) if text is not None else None
    if perm is None:
        raise AclConfigError(f"{where}: {text!r} is not a permission (DENY, PUB, SUB or PUB|SUB)")
    return perm


def permission_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def has_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY refuses all; ANY asks for PUB or SUB; else a common bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


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
    default_topic_perm: str = "DENY"
    default_group_perm: str = "DENY"
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


def _text(value: Any, where: str, *, limit: int = 4096) -> str:
    """A scalar of the file as text (YAML reads ``12345678`` as a number: RocketMQ takes it as
    the text it was written as)."""
    if value is None:
        return ""
    if isinstance(value, (bool, dict, list)):
        raise AclConfigError(f"{where}: expected text, found {type(value).__name__}")
    text = str(value).strip()
    if len(text) > limit or any(ord(c) < 0x20 for c in text):
        raise AclConfigError(f"{where}: not one line of at most {limit} characters")
    return text


def _key(value: Any, where: str) -> str:
    text = _text(value, where, limit=KEY_MAX_LENGTH)
    if len(text) < KEY_MIN_LENGTH:
        raise AclConfigError(f"{where}: must have at least {KEY_MIN_LENGTH} characters")
    return text


def _text_list(value: Any, where: str, limit: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # a single entry, or RocketMQ's comma-separated header text
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: expected a list")
    if len(value) > limit:
        raise AclConfigError(f"{where}: more than {limit} entries")
    return [_text(v, where) for v in value]


def _resource_perms(entries: list[str], where: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in entries:
        name, sep, perm = entry.partition("=")
        name = name.strip()
        if not sep or not name or len(name) > 255:
            raise AclConfigError(f"{where}: {entry!r} is not name=PERM")
        out[name] = permission_of(perm, f"{where} {name}")
    return out


def check_account(raw: dict[str, Any], where: str) -> Account:
    """An account from its file (or request) fields, checked; raises ``AclConfigError``."""
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: expected a mapping of the account's fields")
    access_key = _key(raw.get("accessKey"), f"{where} accessKey")
    where = f"account {access_key!r}"
    secret_key = _key(raw.get("secretKey"), f"{where} secretKey")
    admin = raw.get("admin", False)
    if isinstance(admin, str) and admin.strip().lower() in ("true", "false"):
        admin = admin.strip().lower() == "true"
    if not isinstance(admin, bool):
        raise AclConfigError(f"{where} admin: expected true or false")
    account = Account(
        access_key,
        secret_key,
        _text(raw.get("whiteRemoteAddress"), f"{where} whiteRemoteAddress"),
        admin,
        _text(raw.get("defaultTopicPerm") or "DENY", f"{where} defaultTopicPerm").upper(),
        _text(raw.get("defaultGroupPerm") or "DENY", f"{where} defaultGroupPerm").upper(),
        _text_list(raw.get("topicPerms"), f"{where} topicPerms", MAX_RESOURCES),
        _text_list(raw.get("groupPerms"), f"{where} groupPerms", MAX_RESOURCES),
    )
    account.signing_key = SigningKey(secret_key)
    account.default_topic = permission_of(account.default_topic_perm, f"{where} defaultTopicPerm")
    account.default_group = permission_of(account.default_group_perm, f"{where} defaultGroupPerm")
    topics = _resource_perms(account.topic_perms, f"{where} topicPerms")
    groups = _resource_perms(account.group_perms, f"{where} groupPerms")
    account.resources = {**topics, **{group_resource(g): p for g, p in groups.items()}}
    try:
        account.white = AddressPattern(account.white_remote_address)
    except AddressPatternError as exc:
        raise AclConfigError(f"{where} whiteRemoteAddress: {exc}") from None
    return account


def check_white_addresses(
    entries: list[str], where: str = "globalWhiteRemoteAddresses"
) -> list[AddressPattern]:
    patterns = []
    for entry in entries:
        try:
            patterns.append(AddressPattern(entry))
        except AddressPatternError as exc:
            raise AclConfigError(f"{where}: {exc}") from None
    return patterns


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
    white = _text_list(raw.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", 1000)
    accounts_raw = raw.get("accounts") or []
    if not isinstance(accounts_raw, list):
        raise AclConfigError("accounts: expected a list")
    if len(accounts_raw) > MAX_ACCOUNTS:
        raise AclConfigError(f"accounts: more than {MAX_ACCOUNTS}")
    accounts = [check_account(a, f"accounts[{i}]") for i, a in enumerate(accounts_raw)]
    return build_config(white, accounts)
