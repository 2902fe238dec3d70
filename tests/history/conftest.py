"""Metric history tests: Django settings here (engine tests never load Django), a fake clock."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.project.settings")

import django

django.setup()

from datetime import UTC, datetime, timedelta  # noqa: E402

import pytest  # noqa: E402

from history import clock  # noqa: E402

CLUSTER = "127.0.0.1:9876"


class FakeClock:
    """``history.clock.now`` under a test's control."""

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


@pytest.fixture
def one_cluster(settings):
    settings.BROKER_NAMESRV = CLUSTER
    return CLUSTER
