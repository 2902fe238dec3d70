"""Decode JSON bodies written by Java peers (fastjson), which is not always standard JSON.

fastjson writes maps with integer keys unquoted (``{0:"127.0.0.1:10911"}``) and, for object keys,
the object itself as the key (ConsumeStats, TopicStatsTable, ResetOffsetBody). Standard bodies
decode directly; unquoted numeric keys are quoted for a second attempt; object keys go through a
small parser that returns them as tuples of (name, value) pairs, so they stay hashable.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_UNQUOTED_INT_KEY = re.compile(rb"([{,])\s*(-?\d+)\s*:")


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
        value = self._value()
        self._skip_ws()
        if self.pos != len(self.text):
            raise ValueError(f"extra data at character {self.pos}")
        return value

    def _value(self) -> Any:
        self._skip_ws()
        if self.pos >= len(self.text):
            raise ValueError("unexpected end of JSON")
        char = self.text[self.pos]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        value, self.pos = self._scalar.raw_decode(self.text, self.pos)
        return value

    def _object(self) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        self.pos += 1
        if self._peek() == "}":
            self.pos += 1
            return result
        while True:
            key = _hashable(self._value())
            self._expect(":")
            result[key] = self._value()
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("}")
            return result

    def _array(self) -> list[Any]:
        result: list[Any] = []
        self.pos += 1
        if self._peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self._value())
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("]")
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
    """A body that is not JSON, even by fastjson's looser rules."""


def loads(raw: bytes | str):
    if isinstance(raw, str):
        raw = raw.encode()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(_UNQUOTED_INT_KEY.sub(rb'\1"\2":', raw))
    except orjson.JSONDecodeError:
        pass
    try:
        return _ObjectKeyParser(raw.decode("utf-8")).parse()
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonBodyError(f"the body is not valid JSON: {exc}") from None


def dumps_object_key_map(entries: list[tuple[dict, object]]) -> bytes:
    """A map keyed by objects, as fastjson writes ``Map<MessageQueue, …>`` for Java peers
    (``{{"brokerName":"b","queueId":0,"topic":"t"}:{…}}``)."""
    return b"{" + b",".join(orjson.dumps(key) + b":" + orjson.dumps(value) for key, value in entries) + b"}"
