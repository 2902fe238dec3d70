"""A path converter for names that come from the cluster (topics, groups, brokers, message ids).

Names are checked where they enter the broker, but the console shows whatever a broker holds — an
older store, a peer that checks less — and every such name must make a link that leads back to it.
Django's ``str`` converter refuses ``/`` (reversing fails: a 500), and a browser resolves a segment
``.`` or ``..`` (also written ``%2E%2E``) before sending the request. So this converter writes
``~`` as ``~7E``, ``/`` as ``~2F`` and a name made of dots with every dot as ``~2E``; everything
else is percent-encoded by Django as usual. ``~`` is outside RocketMQ's name characters
(``%|a-zA-Z0-9_-``), so every valid name's URL is unchanged.
"""

from __future__ import annotations

import re

_ESCAPED = {"~": "~7E", "/": "~2F"}
_ESCAPE = re.compile(r"~(?:[0-9A-F]{2})?")


def name_to_segment(name: str) -> str:
    if name == "":
        return "~"
    if set(name) == {"."}:
        return "~2E" * len(name)
    return "".join(_ESCAPED.get(char, char) for char in name)


def segment_to_name(segment: str) -> str:
    def unescape(match: re.Match) -> str:
        token = match.group()
        if token == "~":
            if segment != "~":
                raise ValueError("a '~' must start an escape")
            return ""
        return chr(int(token[1:], 16))

    return _ESCAPE.sub(unescape, segment)


class NameConverter:
    """``<name:topic>``: any non-empty path segment; see the module's docstring for the escapes."""

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return segment_to_name(value)  # a malformed escape is a ValueError: no match, a 404

    def to_url(self, value: str) -> str:
        return name_to_segment(value)
