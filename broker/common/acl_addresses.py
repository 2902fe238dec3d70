"""The remote-address patterns of RocketMQ's plain ACL (``globalWhiteRemoteAddresses`` and an
account's ``whiteRemoteAddress``), parsed once when the file loads and matched per request.

The grammar, as RocketMQ's RemoteAddressStrategyFactory reads it:

- empty: matches nothing (an account without a white address);
- ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches every address;
- one address, IPv4 (``192.168.0.1``) or IPv6 (``::1``, any spelling);
- a choice in the last part: ``192.168.1.{1,2,3}`` or ``2001:db8::{1,2}``;
- a list of addresses or patterns: ``192.168.1.1,10.0.0.1``;
- ranges and wildcards by part: ``192.168.*.*``, ``192.168.1-10.*``, ``10.0.0.100-200``, and for
  IPv6 the same by group in hex (``2001:db8:0:0:0:0:0:1-ff``, ``2001:db8:*:*:*:*:*:*``).

Anything else is an error naming the pattern, raised when the file is loaded (never a silent
"matches nothing"). Patterns are bounded: a list holds at most ``MAX_ITEMS`` entries, a choice
``MAX_CHOICES`` values, a pattern ``MAX_PATTERN_LENGTH`` characters.

The broker matches peers against these; the admin client parses a pattern before sending it, so a
pattern the broker would refuse is named by the tool (``broker.common.acl_rules``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

MAX_PATTERN_LENGTH = 4096
MAX_ITEMS = 256
MAX_CHOICES = 256
_MATCH_ALL = {"*", "*.*.*.*", "*:*:*:*:*:*:*:*"}


class AddressPatternError(ValueError):
    """A white-address pattern that does not parse; the message names it and says why."""


# One part of an address pattern: the inclusive range of values it allows, or a set of values.
Part = tuple[int, int] | frozenset[int]


@dataclass(frozen=True, slots=True)
class _PartsPattern:
    version: int  # 4 or 6
    parts: tuple[Part, ...]  # 4 octets or 8 groups

    def matches(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        if address.version != self.version:
            return False
        values = _parts_of(address)
        for value, part in zip(values, self.parts, strict=True):
            if isinstance(part, frozenset):
                if value not in part:
                    return False
            elif not part[0] <= value <= part[1]:
                return False
        return True


def _parts_of(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> tuple[int, ...]:
    packed = address.packed
    if address.version == 4:
        return tuple(packed)
    return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


class AddressPattern:
    """A parsed pattern: ``matches(host)`` for a peer's IP address text."""

    __slots__ = ("_all", "_exact", "_none", "_patterns", "text")

    def __init__(self, text: str | None) -> None:
        text = (text or "").strip()
        self.text = text
        self._all = text in _MATCH_ALL
        self._none = not text
        self._exact: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
        self._patterns: list[_PartsPattern] = []
        if self._all or self._none:
            return
        if len(text) > MAX_PATTERN_LENGTH:
            raise AddressPatternError(f"the address pattern is longer than {MAX_PATTERN_LENGTH} characters")
        if text.endswith("}"):
            self._add(_parse_choice(text))
            return
        items = [item.strip() for item in text.split(",")]
        if len(items) > MAX_ITEMS:
            raise AddressPatternError(f"{text[:60]!r}…: more than {MAX_ITEMS} addresses in one list")
        for item in items:
            if not item:
                raise AddressPatternError(f"{text!r}: an empty entry in the list")
            if item in _MATCH_ALL:
                self._all = True
            elif item.endswith("}"):
                self._add(_parse_choice(item))
            else:
                self._add(_parse_item(item))

    def _add(self, parsed) -> None:
        if isinstance(parsed, _PartsPattern):
            self._patterns.append(parsed)
        else:
            self._exact.add(parsed)

    @property
    def is_empty(self) -> bool:
        return self._none

    def matches(self, host: str) -> bool:
        if self._all:
            return True
        if self._none:
            return False
        address = parse_host_address(host)
        if address is None:
            return False
        if address in self._exact:
            return True
        return any(pattern.matches(address) for pattern in self._patterns)

    def __repr__(self) -> str:
        return f"AddressPattern({self.text!r})"


def parse_host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A peer's address as an IP address; an IPv4-mapped IPv6 address (a dual-stack socket's
    ``::ffff:10.0.0.1``) as its IPv4 address, so IPv4 patterns apply to it."""
    host = host.strip().strip("[]")
    if "%" in host:  # a scope id (fe80::1%eth0) is not part of the address
        host = host.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parse_item(item: str):
    """One address, or a pattern of wildcards and ranges by part."""
    if not any(c in item for c in "*-"):
        address = parse_host_address(item)
        if address is None:
            raise AddressPatternError(f"{item!r} is not an IP address or address pattern")
        return address
    if ":" in item:
        return _PartsPattern(6, _parts(_ipv6_groups(item), 16, item))
    return _PartsPattern(4, _parts(item.split("."), 10, item))


def _parse_choice(item: str) -> _PartsPattern:
    """``prefix.{a,b,c}`` (IPv4) or ``prefix:{a,b}`` (IPv6): the last part is one of the values."""
    open_at = item.rfind("{")
    separator = item[open_at - 1 : open_at] if open_at > 0 else ""
    if separator not in (".", ":") or "{" in item[:open_at] or "}" in item[:-1]:
        raise AddressPatternError(f"{item!r}: a choice {{a,b}} must be the last part of the address")
    values = [v.strip() for v in item[open_at + 1 : -1].split(",")]
    if not values or len(values) > MAX_CHOICES or any(not v for v in values):
        raise AddressPatternError(f"{item!r}: a choice must list 1 to {MAX_CHOICES} values")
    head = item[: open_at - 1]
    if separator == ".":
        parts = [*head.split("."), "0"]
        base, width, limit = 10, 4, 255
    else:
        parts = _ipv6_groups(head + ":0")
        base, width, limit = 16, 8, 0xFFFF
    parsed = list(_parts(parts, base, item))
    if len(parsed) != width:
        raise AddressPatternError(f"{item!r} does not have {width} parts")
    parsed[-1] = frozenset(_number(v, base, limit, item) for v in values)
    return _PartsPattern(4 if separator == "." else 6, tuple(parsed))


def _ipv6_groups(text: str) -> list[str]:
    """The 8 groups of an IPv6 pattern, ``::`` expanded to zero groups."""
    if text.count("::") > 1:
        raise AddressPatternError(f"{text!r}: '::' may appear once")
    if "::" in text:
        left, right = text.split("::")
        head = left.split(":") if left else []
        tail = right.split(":") if right else []
        missing = 8 - len(head) - len(tail)
        if missing < 1:
            raise AddressPatternError(f"{text!r} has too many groups")
        return head + ["0"] * missing + tail
    return text.split(":")


def _parts(parts: list[str], base: int, item: str) -> tuple[Part, ...]:
    width, limit = (4, 255) if base == 10 else (8, 0xFFFF)
    if len(parts) != width:
        raise AddressPatternError(f"{item!r} does not have {width} parts")
    out: list[Part] = []
    for part in parts:
        part = part.strip()
        if part == "*":
            out.append((0, limit))
        elif "-" in part:
            low_text, _, high_text = part.partition("-")
            low, high = _number(low_text, base, limit, item), _number(high_text, base, limit, item)
            if low > high:
                raise AddressPatternError(f"{item!r}: the range {part} runs backwards")
            out.append((low, high))
        else:
            value = _number(part, base, limit, item)
            out.append((value, value))
    return tuple(out)


def _number(text: str, base: int, limit: int, item: str) -> int:
    text = text.strip()
    digits = "0123456789" if base == 10 else "0123456789abcdefABCDEF"
    if not text or len(text) > 4 or any(c not in digits for c in text):
        raise AddressPatternError(f"{item!r}: {text!r} is not a number of an address part")
    value = int(text, base)
    if value > limit:
        raise AddressPatternError(f"{item!r}: {text} is out of range (at most {limit})")
    return value
