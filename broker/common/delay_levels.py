"""Delay levels: ``messageDelayLevel`` text and the delays it names (RocketMQ's default).

The one grammar of a delay level, for the store (the schedule it keeps), the broker.conf key table
(what UPDATE_BROKER_CONFIG and the loader accept), the console and the Spark reports.
"""

from __future__ import annotations

import re

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
MAX_LEVELS = 64

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# 1 to 999999 of a unit: the text comes from broker.conf or a request, so its numbers are bounded.
_LEVEL = re.compile(r"([1-9]\d{0,5})([smhd])")


def parse_delay_levels(text: str) -> list[int]:
    """Each level's delay in milliseconds, level 1 first; ValueError says what is wrong."""
    tokens = text.split()
    if not tokens or len(tokens) > MAX_LEVELS:
        raise ValueError(f"must list 1-{MAX_LEVELS} delays")
    levels = []
    for token in tokens:
        match = _LEVEL.fullmatch(token)
        if not match:
            raise ValueError(f"{token!r} is not a delay like 10s, 5m, 2h or 1d (bad messageDelayLevel entry)")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    return levels
