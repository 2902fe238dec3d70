"""Scope patterns of rules and silences: a glob over a cluster, broker, topic or group name.

A pattern is typed by an operator, so it is bounded and limited to the characters RocketMQ allows in
names (letters, digits, ``_ - % |``) plus the glob wildcards ``*`` and ``?``. Character classes
(``[...]``) are not offered: a name may not contain brackets, and a class adds nothing an operator
needs that two rules would not say more plainly. Empty means "any".
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from django.core.exceptions import ValidationError

MAX_PATTERN_LENGTH = 128
# ". : ;" for name-server entries ("host:port;host:port") and broker members ("broker-a:0").
_ALLOWED = re.compile(r"^[A-Za-z0-9_%|*?.:;-]*$")


def validate_pattern(value: str) -> None:
    if len(value) > MAX_PATTERN_LENGTH:
        raise ValidationError(f"a pattern is at most {MAX_PATTERN_LENGTH} characters")
    if not _ALLOWED.match(value):
        raise ValidationError(
            "use letters, digits, _ - % | . : ; and the wildcards * (any run) and ? (one character)"
        )


def matches(pattern: str, name: str) -> bool:
    """Does ``name`` fall in ``pattern``? An empty pattern matches everything, even no name."""
    return not pattern or fnmatchcase(name, pattern)
