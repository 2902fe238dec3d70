"""The rules for topic and group names, and the one safe way to turn a name into a path.

RocketMQ's TopicValidator: a topic is 1-127 characters from ``[%|a-zA-Z0-9_-]``. Its clients
allow groups of the same characters up to 255; here groups are held to 127 like topics (issue 21),
so a group name is never longer than the topic names the broker stores. ``%RETRY%<group>`` and
``%DLQ%<group>`` are topics derived from a group: a group longer than 120 characters can be
consumed, but its retry copies exceed the topic limit and are refused when stored.

Every name that arrives from a socket, a file or a form passes through here before it is looked
up, stored or used to build a path. Problems are plain strings (the remark of RocketMQ's answer);
callers pick the response code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 127
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+")
# How much of an illegal name a remark repeats: enough to recognise it, never megabytes.
_SHOWN_CHARS = 64


class IllegalName(ValueError):
    """A topic or group name that breaks the rules; the message is the reason."""


def shown(name: str) -> str:
    """``name`` as a remark or log line may show it: quoted, escaped and cut short."""
    if len(name) > _SHOWN_CHARS:
        return repr(name[:_SHOWN_CHARS]) + f"... ({len(name)} characters)"
    return repr(name)


# Names already found legal, per kind: every send checks its topic and producer group, and a
# broker sees few distinct names, so the usual check is one set lookup. Bounded: past it, names
# are checked each time (still correct, only slower). Hot paths holding a ``str`` may test
# ``name in KNOWN_LEGAL_TOPICS`` before calling ``topic_problem`` (a call saved per message);
# only ``_problem`` adds to these sets.
_KNOWN_LEGAL_MAX = 65_536
KNOWN_LEGAL_TOPICS: set[str] = set()
KNOWN_LEGAL_GROUPS: set[str] = set()


def topic_problem(name: object) -> str | None:
    """Why ``name`` is not a legal topic name (RocketMQ's remark), or None when it is."""
    try:
        if name in KNOWN_LEGAL_TOPICS:
            return None
    except TypeError:  # unhashable (a list from a JSON body): refused below
        pass
    return _problem("topic", name, TOPIC_MAX_LENGTH, KNOWN_LEGAL_TOPICS)


def group_problem(name: object) -> str | None:
    """Why ``name`` is not a legal group name, or None when it is."""
    try:
        if name in KNOWN_LEGAL_GROUPS:
            return None
    except TypeError:
        pass
    return _problem("group", name, GROUP_MAX_LENGTH, KNOWN_LEGAL_GROUPS)


def check_topic(name: object) -> str:
    """``name`` when it is a legal topic name; raises IllegalName otherwise."""
    problem = topic_problem(name)
    if problem:
        raise IllegalName(problem)
    return name  # type: ignore[return-value]  # a str: _problem refuses anything else


def check_group(name: object) -> str:
    problem = group_problem(name)
    if problem:
        raise IllegalName(problem)
    return name  # type: ignore[return-value]


def _problem(kind: str, name: object, max_length: int, known_legal: set[str]) -> str | None:
    if name is None or name == "":
        return f"The specified {kind} is blank (the name is empty)"
    if not isinstance(name, str):
        return f"The specified {kind} is not a string but {type(name).__name__}"
    # The length first: the set of known names must never keep megabyte names a client sent.
    if len(name) > max_length:
        return (
            f"The specified {kind} {shown(name)} is longer than {max_length} characters ({kind} max length)"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f"The specified {kind} {shown(name)} contains characters other than letters, digits, "
            f"%, |, _ and - (allowing only {VALID_PATTERN})"
        )
    if len(known_legal) < _KNOWN_LEGAL_MAX:
        known_legal.add(name)
    return None


def is_path_name(name: str) -> bool:
    """Whether ``name_path`` takes ``name`` (legal characters, any length)."""
    return bool(_LEGAL.fullmatch(name))


def name_path(root: Path | str, name: str) -> Path:
    """``root / name`` for a topic (or group) name used as a directory or file name.

    The name must be made of the legal characters (no separator, no dot, so no ``..``), and the
    result must stay directly under ``root`` however ``root`` itself is linked. Both are checked
    here, where the path is built, whatever was checked where the name came in. The length is
    not: stores hold derived topics (``%RETRY%`` + a 127-character group) a little longer than 127.
    """
    if not isinstance(name, str) or not is_path_name(name):
        raise IllegalName(f"refusing to build a path from the name {shown(str(name))}")
    base = Path(root)
    path = base / name
    resolved_base = Path(os.path.realpath(base))
    if Path(os.path.realpath(path)).parent != resolved_base:
        raise IllegalName(f"the name {shown(name)} leads outside {base}")
    return path
