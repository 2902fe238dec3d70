"""The one time source of metric history: sampling, rollups, retention and queries all ask
``clock.now()``, so a test can replace it (``monkeypatch.setattr(history.clock, "now", ...)``) and
play days of samples in a second. Call it as ``clock.now()`` (module attribute), never import the
function by name, or a patched clock is not seen."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)
