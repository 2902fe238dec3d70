"""``MessageSelector``: what a consumer subscribes to — a tag expression or SQL92 over properties."""

from __future__ import annotations

from dataclasses import dataclass

TAG, SQL92 = "TAG", "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = "*") -> MessageSelector:
        """``*`` for every message, or tags joined with ``||`` (``TagA || TagB``)."""
        return cls(TAG, (expression or "*").strip() or "*")

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """SQL92 over message properties; needs ``enablePropertyFilter=true`` on the brokers."""
        if not expression or not expression.strip():
            raise ValueError("a SQL92 selector needs an expression")
        return cls(SQL92, expression.strip())

    @property
    def is_tag(self) -> bool:
        return self.expression_type == TAG
