"""A fake ``core.clock.now`` for the metric-history and alert tests (alerts read the same
clock), as a pytest fixture both test folders' conftests take from here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core import clock


class FakeClock:
    """``core.clock.now`` under a test's control."""

    def __init__(self, start: datetime) -> None:
        self.moment = start

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> datetime:
        self.moment += timedelta(**delta)
        return self.moment


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    fake = FakeClock(datetime(2026, 11, 20, 0, 0, 0, tzinfo=UTC))
    monkeypatch.setattr(clock, "now", fake)
    return fake
