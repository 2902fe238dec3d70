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


@register.filter
def duration_ms(value) -> str:
    """A duration in milliseconds for people: ``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 10 min``;
    empty for a missing or negative value."""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        return ""
    if ms < 0:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


@register.filter
def iec_bytes(value) -> str:
    """A byte count for people, in powers of 1024 with their IEC names (``0 B``, ``4.0 KiB``,
    ``4.8 MiB``): Django's filesizeformat computes the same but labels it KB/MB. Empty for a
    missing or negative value."""
    try:
        size = int(value)
    except (TypeError, ValueError):
        return ""
    if size < 0:
        return ""
    if size < 1024:
        return f"{size} B"
    scaled = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "TiB":
            break
    return f"{scaled:.1f} {unit}"
