"""Broker-side message filters: tag expressions and SQL92 over message properties."""

from .message_filter import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    MAX_TAG_EXPRESSION_LENGTH,
    FilterCache,
    SqlMessageFilter,
    TagFilter,
    check_subscription,
    check_tag_expression,
    is_tag_type,
)
from .sql92 import (
    MAX_SQL_DEPTH,
    MAX_SQL_LENGTH,
    MAX_SQL_TOKENS,
    FilterSyntaxError,
    SqlExpression,
    compile_sql92,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "MAX_SQL_DEPTH",
    "MAX_SQL_LENGTH",
    "MAX_SQL_TOKENS",
    "MAX_TAG_EXPRESSION_LENGTH",
    "FilterCache",
    "FilterSyntaxError",
    "SqlExpression",
    "SqlMessageFilter",
    "TagFilter",
    "check_subscription",
    "check_tag_expression",
    "compile_sql92",
    "is_tag_type",
]
