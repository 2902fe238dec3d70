"""The one time source of metric history: sampling, rollups, retention and queries all ask
``clock.now()``, so a test can replace it (``monkeypatch.setattr(core.clock, "now", ...)``) and
play days of samples in a second. Call it as ``clock.now()`` (module attribute), never import the
function by name, or a patched clock is not seen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings

# A figure older than this many sampling intervals no longer stands for "now": the overview reads
# live instead, and a level alert whose subject has no newer figure resolves as "no data".
STALE_CYCLES = 3


def now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


def stale_after() -> timedelta:
    """How old the newest figure may be and still stand for "now" (``STALE_CYCLES`` intervals)."""
    return timedelta(seconds=STALE_CYCLES * settings.HISTORY_SAMPLE_SECONDS)


def day_start(moment: datetime | None = None) -> datetime:
    """00:00 UTC of the day of ``moment`` (now): where "today" of the overview and the history starts."""
    moment = (moment or now()).astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)
