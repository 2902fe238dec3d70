"""Template filters for cluster figures, shared by the pages of every app of the project (a
builtin library: every template has them; Python code may call the functions too)."""

from __future__ import annotations

import datetime

from django import template
from django.urls import NoReverseMatch, reverse

register = template.Library()


@register.filter
def millis(value) -> str:
    """Epoch milliseconds as UTC ``YYYY-MM-DD HH:MM:SS.mmm``; empty for 0 / missing."""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        return ""
    if ms <= 0:
        return ""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


@register.filter
def minus(value, other) -> int:
    try:
        return int(value) - int(other)
    except (TypeError, ValueError):
        return 0


@register.filter
def percent(ratio) -> str:
    try:
        return f"{float(ratio) * 100:.1f} %"
    except (TypeError, ValueError):
        return "-"


@register.filter
def config_value(value) -> str:
    """A config value as RocketMQ writes it: booleans as true / false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@register.simple_tag
def optional_url(name: str, *args) -> str:
    """The URL of ``name``, or "" when no URL module provides it (pages of other console parts)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""
