"""The filters the store applies while a consumer pulls, and the per-subscription compile cache.

The store asks ``is_matched_by_consume_queue(tags_code)`` first (cheap: the tag hash in the
consume-queue entry), then ``is_matched_by_commit_log(record)`` on the stored record. Tag
filters answer from the hash alone (the client compares the tag strings again, as RocketMQ's
does); SQL92 filters decode the record's properties and evaluate the compiled expression.
"""

from __future__ import annotations

import threading
from functools import lru_cache

from broker.common.java_hash import java_string_hash
from broker.common.message_codec import MessageDecodeError, decode_message

from .sql92 import FilterSyntaxError, SqlExpression, compile_sql92, sql_length_problem

EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"
# ``TagA || TagB || ...``: about 400 tags. Each tag is hashed on the event loop (and the hash
# weights of each length are cached), so an unbounded expression costs time and memory.
MAX_TAG_EXPRESSION_LENGTH = 4096


def is_tag_type(expression_type: str | None) -> bool:
    return not expression_type or expression_type.upper() == EXPRESSION_TYPE_TAG


class TagFilter:
    """Tag hash codes against the consume-queue entries (``*`` or empty: everything)."""

    def __init__(self, expression: str | None) -> None:
        check_tag_expression(expression)
        expression = (expression or "").strip()
        self.codes: set[int] | None = None
        if expression and expression != "*":
            self.codes = {java_string_hash(tag.strip()) for tag in expression.split("||") if tag.strip()}

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self.codes is None or tags_code in self.codes

    def is_matched_by_commit_log(self, record) -> bool:
        return True


def check_tag_expression(expression: object) -> None:
    """Raise FilterSyntaxError when a tag expression is not text or longer than allowed."""
    if expression is not None and not isinstance(expression, str):
        raise FilterSyntaxError(f"the tag expression is a {type(expression).__name__}, not text")
    if expression is not None and len(expression) > MAX_TAG_EXPRESSION_LENGTH:
        raise FilterSyntaxError(
            f"the tag expression has {len(expression)} characters, "
            f"more than the {MAX_TAG_EXPRESSION_LENGTH} allowed"
        )


class SqlMessageFilter:
    """A compiled SQL92 expression evaluated on each stored message's properties."""

    def __init__(self, expression: SqlExpression) -> None:
        self.expression = expression

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True  # no property is in the consume queue: decide on the record

    def is_matched_by_commit_log(self, record) -> bool:
        try:
            properties = decode_message(record, read_body=False).properties
        except MessageDecodeError:
            return False
        return self.expression.matches(properties)


def check_subscription(expression_type: str | None, expression: str | None, property_filter: bool):
    """``None`` when the broker accepts this subscription, else ``(is_unsupported, reason)``.

    ``is_unsupported`` distinguishes "this broker does not filter by SQL92" (RocketMQ answers
    SYSTEM_ERROR) from "the expression does not parse" (SUBSCRIPTION_PARSE_FAILED).
    """
    if expression_type is not None and not isinstance(expression_type, str):
        return True, f"The broker does not support consumer to filter message by {expression_type!r}"
    if is_tag_type(expression_type):
        try:
            check_tag_expression(expression)
        except FilterSyntaxError as exc:
            return False, str(exc)
        return None
    if (expression_type or "").upper() != EXPRESSION_TYPE_SQL92:
        return True, f"The broker does not support consumer to filter message by {expression_type}"
    if not property_filter:
        return True, "The broker does not support consumer to filter message by SQL92"
    if expression is not None and not isinstance(expression, str):
        return False, f"the SQL92 expression is a {type(expression).__name__}, not text"
    reason = sql_problem(expression or "")
    return None if reason is None else (False, reason)


def sql_problem(expression: str) -> str | None:
    """Why ``expression`` does not compile, or None."""
    # A long one is refused before the cache could keep it.
    return sql_length_problem(expression) or _cached_sql_problem(expression)


@lru_cache(maxsize=1024)  # consumers repeat their subscriptions in every heartbeat (each 30 s)
def _cached_sql_problem(expression: str) -> str | None:
    # At most 1,024 x MAX_SQL_LENGTH characters are kept; a known expression costs nothing.
    try:
        compile_sql92(expression)
    except FilterSyntaxError as exc:
        return str(exc)
    return None


class FilterCache:
    """Compiled SQL92 filters per (group, topic), recompiled only when expression or version change.

    Parsing is far more expensive than evaluating, and a consumer pulls many times per
    subscription, so each subscription is compiled once (RocketMQ's ConsumerFilterManager keeps
    them the same way, by group, topic and subscription version).
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[str, str], tuple[str, int, SqlMessageFilter]] = {}
        self._lock = threading.Lock()
        self.compilations = 0

    def get(self, group: str, topic: str, expression: str, version: int) -> SqlMessageFilter:
        key = (group, topic)
        with self._lock:
            cached = self._entries.get(key)
        if cached is not None and cached[0] == expression and cached[1] >= version:
            return cached[2]
        compiled = SqlMessageFilter(compile_sql92(expression))  # raises FilterSyntaxError
        with self._lock:
            self.compilations += 1
            if len(self._entries) >= self.max_entries and key not in self._entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (expression, version, compiled)
        return compiled

    def forget_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[0] == group]:
                del self._entries[key]
