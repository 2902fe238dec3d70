"""Playing sampling cycles into the metric history as the sampler stores them (``history.sampler.store``,
which sends ``sample_stored`` once committed, so the alert rules are evaluated as in production)."""

from __future__ import annotations

from alerts.defaults import DEFAULT_RULES
from alerts.models import AlertRule
from core import clock
from history.models import Cycle
from history.sampler import store

CLUSTER = "127.0.0.1:9876"


def play_cycle(capture, figures: dict[tuple[str, str, str], float], cluster: str = CLUSTER) -> None:
    """Store one cycle at ``clock.now()`` with ``figures`` ((metric, scope, name) -> value); the
    on-commit work (the signal, the evaluation, queuing notifications) runs before this returns.
    ``capture`` is pytest-django's ``django_capture_on_commit_callbacks``."""
    with capture(execute=True):
        store(Cycle(cluster=cluster, taken_at=clock.now(), points=len(figures)), figures)


def lag(group: str, value: float, consume_tps: float = 0.0) -> dict[tuple[str, str, str], float]:
    return {("lag", "group", group): value, ("consume_tps", "group", group): consume_tps}


def the_default_rule(*kinds: str) -> AlertRule:
    """The default rule of the first kind, the only rules left those of ``kinds`` (so only their
    events are made)."""
    names = [next(r["name"] for r in DEFAULT_RULES if r["kind"] == kind) for kind in kinds]
    AlertRule.objects.exclude(name__in=names).delete()
    return AlertRule.objects.get(name=names[0])
