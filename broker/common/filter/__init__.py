"""Broker-side message filters: tag expressions and SQL92 over message properties."""

from .message_filter import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    FilterCache,
    SqlMessageFilter,
    TagFilter,
    check_subscription,
    is_tag_type,
)
from .sql92 import FilterSyntaxError, SqlExpression, compile_sql92

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "FilterCache",
    "FilterSyntaxError",
    "SqlExpression",
    "SqlMessageFilter",
    "TagFilter",
    "check_subscription",
    "compile_sql92",
    "is_tag_type",
]
