"""JSON bodies in fastjson's dialect, the one RocketMQ's Java peers read and write.

RocketMQ encodes every body with ``JSON.toJSONString`` (RemotingSerializable) and fastjson's
defaults: fields whose value is null are left out, object fields are written in name order, maps
keyed by ``Integer``/``Long`` get their keys unquoted (``{0:"127.0.0.1:10911"}``) and maps keyed by
objects get the object itself as the key (ConsumeStats, TopicStatsTable, ResetOffsetBody).

``dumps`` writes that dialect; ``loads`` reads it: standard bodies decode directly, unquoted
numeric keys are quoted for a second attempt, and object keys go through a small parser that
returns them as tuples of (name, value) pairs, so they stay hashable.

A request's body is untrusted: nesting deeper than fastjson reads (``MAX_DEPTH``, its "array
level > 512") is refused before it can exhaust Python's stack (orjson stops at 1024 levels on its
own, the small parser here at ``MAX_DEPTH``), and a whole number too big for 64 bits, which
orjson would turn into a float, is read as the int it is, so a refusal says the value as sent.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# A string literal (kept as it is) or a bare numeric key (quoted): strings are matched whole so
# that text such as "a,1:b" inside a value is never taken for a key.
_STRING_OR_BARE_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')
MAX_DEPTH = 512  # fastjson's DefaultJSONParser refuses deeper arrays and objects
# 19 digits in a row: maybe a number past 64 bits, which orjson reads as a float (rare: a Java
# long has at most 19 digits, and such a run inside a string only costs a slower second reading).
_MAYBE_BIG_INT = re.compile(rb"\d{19}")


class _ObjectKeyParser:
    """fastjson's full dialect: maps keyed by objects (``{{"topic":..}:{..}}``) and bare number keys.

    Plain JSON parsers reject those, yet RocketMQ bodies such as ConsumeStats use them.
    Object keys come back as tuples of (name, value) pairs so they stay hashable.
    """

    _scalar = json.JSONDecoder()

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> Any:
        value = self._value(0)
        self._skip_ws()
        if self.pos != len(self.text):
            raise ValueError(f"extra data at character {self.pos}")
        return value

    def _value(self, depth: int) -> Any:
        """The value at ``pos``: containers are read here, not in helpers, so that one level of
        nesting costs one Python frame and ``MAX_DEPTH`` levels fit in the default stack."""
        self._skip_ws()
        if self.pos >= len(self.text):
            raise ValueError("unexpected end of JSON")
        char = self.text[self.pos]
        if char not in "{[":
            value, self.pos = self._scalar.raw_decode(self.text, self.pos)
            return value
        if depth >= MAX_DEPTH:
            raise JsonBodyError(TOO_DEEP)
        self.pos += 1
        closing = "}" if char == "{" else "]"
        result: Any = {} if char == "{" else []
        if self._peek() == closing:
            self.pos += 1
            return result
        while True:
            if char == "{":
                key = _hashable(self._value(depth + 1))
                self._expect(":")
                result[key] = self._value(depth + 1)
            else:
                result.append(self._value(depth + 1))
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect(closing)
            return result

    def _skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def _peek(self) -> str:
        self._skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise ValueError(f"expected {char!r} at character {self.pos}")
        self.pos += 1


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


class JsonBodyError(ValueError):
    """A body that is not JSON, even by fastjson's looser rules. Its message is for the sender:
    the broker answers with it and logs no traceback (the sender's mistake, not the broker's)."""


TOO_DEEP = f"the body nests arrays and objects deeper than fastjson reads ({MAX_DEPTH} levels)"


def loads(raw: bytes | str):
    if isinstance(raw, str):
        raw = raw.encode()
    try:
        return _whole_ints(orjson.loads(raw), raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # past orjson's 1024 levels: nothing else would read it
            raise JsonBodyError(TOO_DEEP) from None
    quoted = _STRING_OR_BARE_KEY.sub(_quote_bare_key, raw)
    try:
        return _whole_ints(orjson.loads(quoted), quoted)
    except orjson.JSONDecodeError:
        pass
    try:
        return _ObjectKeyParser(raw.decode("utf-8")).parse()
    except JsonBodyError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonBodyError(f"the body is not valid JSON: {exc}") from None


def _whole_ints(value: Any, raw: bytes) -> Any:
    """``value`` as orjson read ``raw``, or, when ``raw`` may hold a number past 64 bits (read as
    a float), read again by the standard parser, which keeps every whole number an int."""
    if _MAYBE_BIG_INT.search(raw) is None:
        return value
    try:
        return json.loads(raw)
    except RecursionError:  # orjson read it, so at most 1024 levels: still past fastjson's 512
        raise JsonBodyError(TOO_DEEP) from None


def _quote_bare_key(match: re.Match) -> bytes:
    if match.group(2) is None:
        return match.group(0)
    return match.group(1) + b'"' + match.group(2) + b'"' + match.group(3)


class ObjectKeyMap(list):
    """A Java map keyed by objects (``Map<MessageQueue, …>``), as (key fields, value) pairs in
    the order to write them; ``dumps`` writes each key as the object itself."""


def dumps(value: Any) -> bytes:
    """``value`` as fastjson writes it with RocketMQ's defaults (see the module's docstring).

    Dicts stand for Java objects and maps alike: entries whose value is None are left out and
    the rest are written in key order (a bean's fields by name, as fastjson sorts them); int
    keys are written bare, as fastjson writes ``Integer`` and ``Long`` keys.
    """
    parts: list[bytes] = []
    _write(value, parts)
    return b"".join(parts)


def _write(value: Any, out: list[bytes]) -> None:
    if isinstance(value, dict):
        entries = sorted(((k, v) for k, v in value.items() if v is not None), key=_key_order)
        _write_map([(_map_key(k), v) for k, v in entries], out)
    elif isinstance(value, ObjectKeyMap):
        _write_map([(dumps(key), v) for key, v in value if v is not None], out)
    elif isinstance(value, list | tuple):
        _write_array(value, out)
    elif isinstance(value, set | frozenset):
        _write_array(sorted(value), out)
    else:
        try:
            out.append(orjson.dumps(value))
        except TypeError:
            if not _is_int(value):
                raise
            out.append(str(value).encode())  # past 64 bits (as a body sent it): as fastjson's BigInteger


def _write_map(entries: list[tuple[bytes, Any]], out: list[bytes]) -> None:
    out.append(b"{")
    for index, (key, item) in enumerate(entries):
        out.append(b"," + key + b":" if index else key + b":")
        _write(item, out)
    out.append(b"}")


def _write_array(items, out: list[bytes]) -> None:
    out.append(b"[")
    for index, item in enumerate(items):
        if index:
            out.append(b",")
        _write(item, out)
    out.append(b"]")


def _key_order(entry: tuple[Any, Any]) -> tuple:
    key = entry[0]
    return (0, key, "") if _is_int(key) else (1, 0, str(key))


def _map_key(key: Any) -> bytes:
    if _is_int(key):
        return str(key).encode()
    if isinstance(key, str):
        return orjson.dumps(key)
    raise TypeError(f"a JSON body's map key must be a str or an int, not {type(key).__name__}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
