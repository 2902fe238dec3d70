"""The metric history as the apps that do not keep it read it (the overview, the cluster and topic
pages, alert evaluation): a port the history app fills in its ``AppConfig.ready()``.

Without a registered history (the app not installed) ``registered()`` answers None and a reader
does without: the overview reads live, no vanished broker is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol


class MetricReadings(Protocol):
    """History reads of one cluster at ``now`` for one alert evaluation, each done once."""

    cluster: str
    now: datetime
    queries: int  # reads done so far

    @property
    def stale_after(self) -> timedelta:
        """How old a subject's last figure may be for its event to keep its state."""
        ...

    def newest_cycle(self) -> datetime | None: ...

    def level(self, metric: str, scope: str) -> dict[str, float | None]:
        """Each name's figure in the newest cycle; None for a name that cycle lacks whose last
        figure is recent (``stale_after``); a name without so recent a figure is absent."""
        ...

    def change_over(
        self, metric: str, scope: str, minutes: int, rises_only: bool = False
    ) -> dict[str, float]:
        """Each name's change seen by the cycles of the last ``minutes``."""
        ...

    def seconds_since_up(self, horizon: timedelta) -> dict[str, float]:
        """Each broker member seen within ``horizon``: seconds since a cycle last found it up."""
        ...


class MetricHistory(Protocol):
    def latest(
        self, metric: str, scope: str, cluster: str | None = None
    ) -> dict[str, tuple[datetime, float]]:
        """Each name's newest stored figure, with when it was sampled."""
        ...

    def growth_since(
        self,
        metric: str,
        scope: str,
        since: datetime,
        cluster: str | None = None,
        names: Iterable[str] | None = None,
    ) -> dict[str, float]:
        """Each name's counter growth from ``since`` to now."""
        ...

    def is_master(self, key: str) -> bool:
        """Whether a broker member's history name (``brokerName:brokerId``) is a master."""
        ...

    def readings(self, cluster: str, now: datetime) -> MetricReadings: ...


_history: MetricHistory | None = None


def register(history: MetricHistory) -> None:
    global _history
    _history = history


def registered() -> MetricHistory | None:
    return _history


def required() -> MetricHistory:
    """The history, for a reader that has no meaning without it (alert evaluation)."""
    if _history is None:
        raise LookupError("no metric history registered: the history app is not installed")
    return _history
