"""Latency fault tolerance (RocketMQ's MQFaultStrategy): a broker that failed recently or
answered slowly is avoided for a while when a producer picks a queue."""

from __future__ import annotations

import time
from collections.abc import Callable

# Latency thresholds (ms) and how long a broker that hit them is avoided (RocketMQ's defaults).
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
# Below the first threshold with a pause, a broker is avoided for no time at all.
_FIRST_PAUSED = next(t for t, p in zip(LATENCY_MAX, NOT_AVAILABLE_MS, strict=True) if p)


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.unavailable_until: dict[str, float] = {}

    def update(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        if not isolation and latency_ms < _FIRST_PAUSED:  # every answered send: keep it short
            self.unavailable_until[broker_name] = self.clock()
            return
        latency = 30_000 if isolation else latency_ms
        duration = 0
        for threshold, pause in zip(reversed(LATENCY_MAX), reversed(NOT_AVAILABLE_MS), strict=True):
            if latency >= threshold:
                duration = pause
                break
        self.unavailable_until[broker_name] = self.clock() + duration / 1000

    def is_available(self, broker_name: str) -> bool:
        return self.clock() >= self.unavailable_until.get(broker_name, 0)

    def forget(self, broker_name: str) -> None:
        """The broker set has another master now: what its old one did says nothing of it."""
        self.unavailable_until.pop(broker_name, None)
