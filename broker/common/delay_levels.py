"""Delay levels: ``messageDelayLevel`` text and the delays it names (RocketMQ's default)."""

from __future__ import annotations

import re

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"(\d+)([smhd])")


def parse_delay_levels(text: str) -> list[int]:
    """Each level's delay in milliseconds, level 1 first; ValueError names a bad entry."""
    levels = []
    for token in text.split():
        match = _LEVEL.fullmatch(token)
        if not match:
            raise ValueError(f"bad messageDelayLevel entry {token!r}")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    return levels
