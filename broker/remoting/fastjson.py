"""Decode JSON bodies written by Java peers (fastjson), which is not always standard JSON.

fastjson writes maps with integer keys unquoted (``{0:"127.0.0.1:10911"}``) and, for object keys,
the object itself as the key. Standard bodies decode directly; otherwise unquoted numeric keys
are quoted before a second attempt.
"""

from __future__ import annotations

import re

import orjson

_UNQUOTED_INT_KEY = re.compile(rb"([{,])\s*(-?\d+)\s*:")


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
    except orjson.JSONDecodeError as exc:
        raise JsonBodyError(f"the body is not valid JSON: {exc}") from None


def dumps_object_key_map(entries: list[tuple[dict, object]]) -> bytes:
    """A map keyed by objects, as fastjson writes ``Map<MessageQueue, …>`` for Java peers
    (``{{"brokerName":"b","queueId":0,"topic":"t"}:{…}}``)."""
    return b"{" + b",".join(orjson.dumps(key) + b":" + orjson.dumps(value) for key, value in entries) + b"}"
