"""A live-tail socket's filter: tag expression, SQL92 over properties, key substring.

SQL92 is evaluated here, in the console, with the broker's own filter module (one grammar, one
home), so a bad expression is refused before any message flows and the shared pull loop of the
topic stays unfiltered for the other sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.filter import FilterSyntaxError, SqlExpression, compile_sql92

MAX_EXPRESSION_LENGTH = 2000


class TailFilterError(ValueError):
    """A filter the console cannot apply; the message says what to fix."""


@dataclass(frozen=True)
class TailFilter:
    tags: frozenset[str] | None = None  # None: every tag
    sql: SqlExpression | None = None
    key: str = ""
    source: dict | None = None

    def matches(self, event: dict) -> bool:
        """``event`` is a tailed message as ``serialize.message_event`` made it."""
        if self.tags is not None and event["tags"] not in self.tags:
            return False
        if self.key and not any(self.key in k for k in event["keys"]) and self.key not in event["msgId"]:
            return False
        return self.sql is None or self.sql.matches(event["properties"])


def compile_filter(tags: str = "", sql: str = "", key: str = "") -> TailFilter:
    tags, sql, key = (tags or "").strip(), (sql or "").strip(), (key or "").strip()
    for name, value in (("tag expression", tags), ("SQL92 expression", sql), ("key", key)):
        if len(value) > MAX_EXPRESSION_LENGTH:
            raise TailFilterError(f"the {name} is longer than {MAX_EXPRESSION_LENGTH} characters")
    tag_set = None
    if tags and tags != "*":
        tag_set = frozenset(t.strip() for t in tags.split("||") if t.strip())
        if not tag_set:
            raise TailFilterError(f"the tag expression {tags!r} names no tag: use tagA || tagB or *")
    compiled = None
    if sql:
        try:
            compiled = compile_sql92(sql)
        except FilterSyntaxError as exc:
            raise TailFilterError(str(exc)) from None
    return TailFilter(tag_set, compiled, key, {"tags": tags, "sql": sql, "key": key})
