"""The rules of a plain-ACL account (RocketMQ 4.9's ``PlainAccessConfig``), in one place for the
broker, which holds accounts to them when it reads ``plain_acl.yml`` or an admin request, and for
the admin client (``mqadmin``, the console), which checks an account before sending it so a typo
is named at once. Both refuse the same values with the same words.

- permissions: ``DENY``, ``PUB``, ``SUB``, ``PUB|SUB`` (or ``SUB|PUB``), any case, and their bits
  as RocketMQ's ``Permission`` class holds them;
- keys: one line of ``KEY_MIN_LENGTH`` to ``KEY_MAX_LENGTH`` characters (RocketMQ refuses 6 or
  fewer); any other text field one line of at most ``MAX_TEXT_LENGTH``;
- a topic or group permission: ``name=PERM``, the name at most ``MAX_RESOURCE_NAME_LENGTH``
  characters, at most ``MAX_RESOURCES`` per account and kind;
- white addresses: the grammar of ``broker.common.acl_addresses``; a global list of at most
  ``MAX_WHITE_ADDRS``, comma-separated where a ``{a,b}`` choice keeps its commas.

Every check raises ``AclRuleError`` with a message naming the field (never a secret's value);
the broker turns it into its ``AclConfigError`` (the file and the account are named around it),
the admin client into its ``AclInputError``.

The account itself has two models, built on these rules: the broker's ``Account``
(``broker.acl.plain_config``) is a complete, checked account with what a request check
needs derived from it (permission bits per resource, the compiled address pattern, the secret's
HMAC key); the admin client's ``PlainAccessConfig`` is what a tool sends or lists, where a field
left ``None`` keeps the broker's value (an update need not name every field) and a listed secret
is masked. One dataclass for both would hold either optional fields the broker must never see
unset, or derived state the client has no use for.
"""

from __future__ import annotations

from typing import Any

from broker.common.acl_addresses import AddressPattern, AddressPatternError
from broker.common.broker_config_keys import SECRET_MASK

# Permission bits as RocketMQ's Permission class holds them (ANY is asked for, never granted).
DENY, ANY, PUB, SUB = 1, 2, 4, 8
PERMISSIONS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
DEFAULT_PERMISSION = "DENY"  # an account's default topic/group permission when none is given

KEY_MIN_LENGTH = 7  # RocketMQ refuses keys of 6 characters or fewer (AclConstants)
KEY_MAX_LENGTH = 256
MAX_TEXT_LENGTH = 4096  # any other text field of an account (a white address pattern)
MAX_RESOURCE_NAME_LENGTH = 255
MAX_RESOURCES = 10_000  # topic permissions per account, and group permissions
MAX_WHITE_ADDRS = 1000  # entries of the global white list

# What a listing shows instead of a secret key: the broker's mask for its secret settings.
MASK = SECRET_MASK


class AclRuleError(ValueError):
    """A value of an account or white list that breaks the rules; the message says which and why."""


# -- text ----------------------------------------------------------------------------------------


def check_text(value: Any, what: str, *, limit: int = MAX_TEXT_LENGTH) -> str:
    """A field as one line of text, trimmed; None is empty. A number is the text it was written
    as (YAML reads ``12345678`` as a number: RocketMQ takes the text)."""
    if value is None:
        return ""
    if isinstance(value, (bool, dict, list)):
        raise AclRuleError(f"{what}: expected text, found {type(value).__name__}")
    text = str(value).strip()
    if len(text) > limit or any(ord(c) < 0x20 for c in text):
        raise AclRuleError(f"{what}: not one line of at most {limit} characters")
    return text


def check_key(value: Any, what: str) -> str:
    """An access or secret key; the message never holds the value (a secret mistyped by one
    character is still nearly the secret)."""
    text = check_text(value, what, limit=KEY_MAX_LENGTH)
    if len(text) < KEY_MIN_LENGTH:
        raise AclRuleError(f"{what}: must have at least {KEY_MIN_LENGTH} characters")
    return text


def check_count(entries: list[Any], limit: int, what: str) -> list[Any]:
    if len(entries) > limit:
        raise AclRuleError(f"{what}: more than {limit} entries")
    return entries


def check_admin_flag(value: Any, what: str = "admin") -> bool:
    """``admin``: a boolean, or the text ``true``/``false`` (a request header's form)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise AclRuleError(f"{what}: expected true or false")
    return value


# -- permissions ---------------------------------------------------------------------------------


def permission_of(text: Any, what: str) -> int:
    """The bits of a permission word (any case, spaces around it ignored)."""
    perm = PERMISSIONS.get(str(text).strip().upper()) if text is not None else None
    if perm is None:
        raise AclRuleError(f"{what}: {text!r} is not a permission (DENY, PUB, SUB or PUB|SUB)")
    return perm


def permission_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def check_default_permission(value: Any, what: str) -> str:
    """A default topic/group permission as written: upper case, empty meaning DENY."""
    text = check_text(value or DEFAULT_PERMISSION, what).upper()
    permission_of(text, what)
    return text


def has_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY refuses all; ANY asks for PUB or SUB; else a common bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# -- topic and group permissions: name=PERM ------------------------------------------------------


def parse_resource_entry(entry: Any, what: str) -> tuple[str, int]:
    """``topicA=PUB|SUB`` → (``topicA``, its permission bits)."""
    text = check_text(entry, what)
    name, sep, perm = text.partition("=")
    name = name.strip()
    if not sep or not name or len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise AclRuleError(f"{what}: {text!r} is not name=PERM")
    return name, permission_of(perm, f"{what} {name}")


def resource_entry(name: str, perm: int) -> str:
    """The entry as written back: ``name=PERM``, the permission's canonical word."""
    return f"{name}={permission_name(perm)}"


def check_resource_entries(entries: list[Any], what: str) -> dict[str, int]:
    """A topic or group permission list → name → permission bits (a later entry for the same
    name wins, as RocketMQ's map keeps it)."""
    check_count(entries, MAX_RESOURCES, what)
    return dict(parse_resource_entry(entry, what) for entry in entries)


def split_entries(text: str) -> list[str]:
    """RocketMQ's comma-separated list of a request header or a tool's flag; blanks skipped."""
    return [item.strip() for item in text.split(",") if item.strip()]


# -- white addresses -----------------------------------------------------------------------------


def white_address_pattern(value: Any, what: str) -> AddressPattern:
    """An account's ``whiteRemoteAddress`` or one global entry, parsed (empty: matches nothing)."""
    text = check_text(value, what)
    try:
        return AddressPattern(text)
    except AddressPatternError as exc:
        raise AclRuleError(f"{what}: {exc}") from None


def check_white_addresses(
    entries: list[Any], what: str = "globalWhiteRemoteAddresses"
) -> list[AddressPattern]:
    check_count(entries, MAX_WHITE_ADDRS, what)
    return [white_address_pattern(entry, what) for entry in entries]


def split_addresses(text: str) -> list[str]:
    """A comma-separated white list; commas inside a ``{a,b}`` choice belong to the choice."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [item.strip() for item in out if item.strip()]
