"""RocketMQ 4.9's plain ACL, administered over the broker's ACL requests: create or update an
account (UPDATE_AND_CREATE_ACL_CONFIG), delete one (DELETE_ACL_CONFIG), replace the global white
list (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG), read the accounts and white list
(GET_BROKER_CLUSTER_ACL_CONFIG) and the file's version (GET_BROKER_CLUSTER_ACL_INFO).

Each request goes to one broker address, as ``DefaultMQAdminExt`` sends them; ``acl_targets``
turns ``-b``/``-c`` into the addresses to ask. Every broker holds its own ``plain_acl.yml``, so a
cluster-wide change is one request per broker, and ``each_broker`` sends it to all of them at
once and reports every broker's outcome: a refusal by one does not undo the others' change, so an
operator must know which brokers changed.

An account is checked here before it is sent, by the rules the broker holds it to
(``broker.common.acl_rules``: keys of 7 to 256 characters, permissions ``DENY``, ``PUB``, ``SUB``,
``PUB|SUB`` or ``SUB|PUB``, resources as ``name=PERM``, white addresses by the broker's pattern
grammar), so a typo is named at once instead of coming back as the broker's refusal; the broker
checks again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.client.client_api import answer_header
from broker.client.errors import MQClientError
from broker.common import acl_rules
from broker.common.acl_rules import (
    MASK,
    MAX_RESOURCES,
    AclRuleError,
    split_addresses,
    split_entries,
)
from broker.common.codes import RequestCode
from broker.common.request_headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

from .core import BROKER, AdminCore
from .parse import as_int, json_body


class AclInputError(MQClientError):
    """An account or white list refused before anything was sent: says which value and why."""


@dataclass(frozen=True)
class PlainAccessConfig:
    """One account of ``plain_acl.yml`` (RocketMQ's ``PlainAccessConfig``).

    Sent as an update, a field left None (or an empty secret key) keeps the account's value, as
    RocketMQ's tool leaves out the options it was not given; an empty text or list replaces it
    (a white address or permission list cleared). ``admin`` is always sent, as RocketMQ sends it.
    """

    access_key: str
    secret_key: str = ""
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    def masked(self) -> dict[str, Any]:
        """The account as RocketMQ names its fields, the secret key replaced by a mask: what
        ``mqadmin getAclConfig`` and the console show (the file keeps the secret)."""
        return {
            "accessKey": self.access_key,
            "secretKey": MASK if self.secret_key else "",
            "whiteRemoteAddress": self.white_remote_address or "",
            "admin": self.admin,
            "defaultTopicPerm": self.default_topic_perm or "",
            "defaultGroupPerm": self.default_group_perm or "",
            "topicPerms": list(self.topic_perms or []),
            "groupPerms": list(self.group_perms or []),
        }


@dataclass(frozen=True)
class AclConfig:
    """A broker's global white list and accounts (GET_BROKER_CLUSTER_ACL_CONFIG)."""

    global_white_addrs: list[str]
    accounts: list[PlainAccessConfig]


@dataclass(frozen=True)
class AclVersion:
    """A broker's ACL file version (GET_BROKER_CLUSTER_ACL_INFO): counter and time of the last change."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    counter: int
    timestamp: int


@dataclass(frozen=True)
class BrokerOutcome:
    """What one broker of a cluster-wide ACL request did: its result, or why it failed."""

    addr: str
    result: Any = None
    error: str | None = None


# -- checks -------------------------------------------------------------------------------------


T = TypeVar("T")


def _ruled(check: Callable[..., T], *args: Any) -> T:
    """A check of acl_rules, its refusal as this client's AclInputError."""
    try:
        return check(*args)
    except AclRuleError as exc:
        raise AclInputError(str(exc)) from None


def check_access_key(access_key: str) -> str:
    return _ruled(acl_rules.check_key, access_key, "accessKey")


def check_secret_key(secret_key: str) -> str:
    return _ruled(acl_rules.check_key, secret_key, "secretKey")


def check_permission(perm: str, what: str) -> str:
    """A default permission, as the broker writes it (upper case; empty is DENY)."""
    return _ruled(acl_rules.check_default_permission, perm, what)


def parse_resource_perms(text: str, what: str) -> list[str]:
    """``topicA=DENY,topicB=PUB|SUB`` (as ``mqadmin updateAclConfig -t/-g`` takes it) → checked
    entries; blank entries are skipped, as RocketMQ's tool skips them. ``what``: ``topicPerms`` or
    ``groupPerms``."""
    return check_resource_perms(split_entries(text), what)


def check_resource_perms(entries: list[str], what: str) -> list[str]:
    """Each entry checked and written ``name=PERM``. A name may not hold a comma here: the request
    carries the list comma-separated, so the broker would read it as two entries."""
    _ruled(acl_rules.check_count, entries, MAX_RESOURCES, what)
    checked = []
    for entry in entries:
        name, perm = _ruled(acl_rules.parse_resource_entry, entry, what)
        if "," in name:
            raise AclInputError(f"{what}: {name[:40]!r} holds a comma, which the request cannot carry")
        checked.append(acl_rules.resource_entry(name, perm))
    return checked


def parse_addr_list(text: str) -> list[str]:
    """A comma-separated address list (``10.10.103.*,192.168.0.{1,2}``) → its entries."""
    return check_addr_list(split_addresses(text))


def check_addr_list(entries: list[str]) -> list[str]:
    """A global white list, each entry parsed by the broker's pattern grammar."""
    patterns = _ruled(acl_rules.check_white_addresses, entries, "globalWhiteRemoteAddresses")
    return [pattern.text for pattern in patterns]


def check_white_address(text: str) -> str:
    """An account's white address, parsed by the broker's pattern grammar (``192.168.0.*``,
    ``192.168.1.{1,2}``, ``10.0.0.1-10``, IPv6 too; empty: from nowhere)."""
    return _ruled(acl_rules.white_address_pattern, text, "whiteRemoteAddress").text


def check_account(account: PlainAccessConfig) -> PlainAccessConfig:
    """The account with every field checked (and trimmed); ``AclInputError`` names the first bad one."""
    white = account.white_remote_address
    return PlainAccessConfig(
        access_key=check_access_key(account.access_key),
        # Empty: an update that keeps the account's secret key (a new account needs one: the
        # broker refuses it without).
        secret_key=check_secret_key(account.secret_key) if account.secret_key.strip() else "",
        white_remote_address=_optional(white, check_white_address),
        admin=account.admin,
        default_topic_perm=_optional(
            account.default_topic_perm, lambda p: check_permission(p, "defaultTopicPerm")
        ),
        default_group_perm=_optional(
            account.default_group_perm, lambda p: check_permission(p, "defaultGroupPerm")
        ),
        topic_perms=_optional(
            account.topic_perms, lambda entries: check_resource_perms(list(entries), "topicPerms")
        ),
        group_perms=_optional(
            account.group_perms, lambda entries: check_resource_perms(list(entries), "groupPerms")
        ),
    )


def _optional(value: Any, check: Callable[[Any], Any]) -> Any:
    return None if value is None else check(value)


# -- reading the broker's answers ----------------------------------------------------------------


def _text_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    if isinstance(value, str) and value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return []


def account_from_json(raw: Any) -> PlainAccessConfig:
    raw = raw if isinstance(raw, dict) else {}
    admin = raw.get("admin")
    return PlainAccessConfig(
        access_key=str(raw.get("accessKey") or ""),
        secret_key=str(raw.get("secretKey") or ""),
        white_remote_address=str(raw.get("whiteRemoteAddress") or ""),
        admin=admin is True or str(admin).lower() == "true",
        default_topic_perm=str(raw.get("defaultTopicPerm") or ""),
        default_group_perm=str(raw.get("defaultGroupPerm") or ""),
        topic_perms=_text_list(raw.get("topicPerms")),
        group_perms=_text_list(raw.get("groupPerms")),
    )


def _version_fields(text: str | None, server: str) -> tuple[int, int]:
    """(counter, timestamp) of a DataVersion JSON (``{"counter":3,"timestamp":…}``)."""
    try:
        raw = json.loads(text or "{}")
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        raise MQClientError(f"{server} answered with a header field 'version' that is no JSON object")
    counter = raw.get("counter")
    if isinstance(counter, dict):  # DataVersion's AtomicLong as fastjson may write it
        counter = counter.get("value")
    return as_int(counter), as_int(raw.get("timestamp"))


# -- the requests ---------------------------------------------------------------------------------


class AclRequests(AdminCore):
    async def acl_targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``-b`` that broker; ``-c`` every broker of the cluster, slaves included: a slave
        enforces the ACL on the reads it serves, so an account deleted on the masters only would
        keep reading there (RocketMQ's deleteAclConfig asks the masters only)."""
        return await self.resolve_all_addrs(broker_addr, cluster)

    async def create_or_update_acl_account(self, addr: str, account: PlainAccessConfig) -> None:
        account = check_account(account)
        header = CreateAccessConfigRequestHeader(
            access_key=account.access_key,
            secret_key=account.secret_key or None,
            white_remote_address=account.white_remote_address,
            admin=account.admin,
            default_topic_perm=account.default_topic_perm,
            default_group_perm=account.default_group_perm,
            topic_perms=None if account.topic_perms is None else ",".join(account.topic_perms),
            group_perms=None if account.group_perms is None else ",".join(account.group_perms),
        )
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)

    async def delete_acl_account(self, addr: str, access_key: str) -> None:
        header = DeleteAccessConfigRequestHeader(access_key=check_access_key(access_key))
        await self._request(addr, RequestCode.DELETE_ACL_CONFIG, header)

    async def update_global_white_addrs(self, addr: str, addrs: list[str]) -> None:
        """Replace the broker's ``globalWhiteRemoteAddresses`` with ``addrs`` (empty: none)."""
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(check_addr_list(addrs))
        )
        await self._request(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)

    async def acl_config(self, addr: str) -> AclConfig:
        """The broker's white list and accounts, secret keys included (callers mask them)."""
        raw = json_body(
            await self._request(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG), f"{BROKER} {addr}"
        )
        accounts = raw.get("plainAccessConfigs")
        return AclConfig(
            global_white_addrs=_text_list(raw.get("globalWhiteAddrs")),
            accounts=[account_from_json(a) for a in accounts] if isinstance(accounts, list) else [],
        )

    async def acl_version(self, addr: str) -> AclVersion:
        response = await self._request(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        server = f"{BROKER} {addr}"
        answer = answer_header(GetBrokerAclConfigResponseHeader, response, server)
        counter, timestamp = _version_fields(answer.version, server)
        return AclVersion(answer.cluster_name, answer.broker_name, answer.broker_addr, counter, timestamp)

    async def each_broker(
        self, addrs: list[str], request: Callable[..., Awaitable[Any]], *args: Any
    ) -> list[BrokerOutcome]:
        """``request(self, addr, *args)`` (an ``AclRequests`` method, e.g.
        ``AclRequests.acl_config``) on every address at once (the brokers are independent, and a
        dead one then costs one timeout, not one per broker after it): each broker's result or
        failure, in the order of ``addrs``. Input refused before sending is raised, as it is
        refused for every broker alike."""

        async def one(addr: str) -> BrokerOutcome:
            try:
                return BrokerOutcome(addr, result=await request(self, addr, *args))
            except AclInputError:
                raise
            except MQClientError as exc:
                return BrokerOutcome(addr, error=str(exc))

        outcomes = await asyncio.gather(*(one(addr) for addr in addrs), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [outcome for outcome in outcomes if isinstance(outcome, BrokerOutcome)]
