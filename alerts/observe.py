"""How each kind of rule is measured on the metric history: one figure per subject (a group, a
broker) of one cluster at the evaluation's time.

A level kind (lag, disk, ...) compares the subject's figure in the newest cycle. A subject that
cycle lacks (its stats failed, its broker stopped answering, the cycle stored nothing) but whose
last figure is at most ``core.clock.STALE_CYCLES`` sampling intervals old is observed as unknown
(``None``): its event keeps its state, as the overview page takes such history for "now". A
subject with no figure that recent is not observed at all, so its event ends as "no data".

Every read covers all subjects of a metric at once (the last few cycles, or every point of a
window), and a ``Readings`` object (the metric history's, ``core.metric_history``) caches them for
one evaluation, so the cost of a cycle grows with the number of distinct metrics the enabled rules
read, not with groups, rules or points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from core.metric_history import MetricReadings as Readings

from .kinds import BROKER, GROUP, KINDS

if TYPE_CHECKING:
    from .models import AlertRule


@dataclass(frozen=True)
class Observation:
    subject: dict[str, str]  # {"cluster": ..., "group": ...} or {"cluster": ..., "broker": ...}
    value: float | None  # None: no figure in the newest cycle, a recent one before (see the module)


# The kinds compared on a subject's newest figure: (metric, scope) each reads.
LEVELS = {
    "group_lag": ("lag", "group"),
    "disk_ratio": ("disk_ratio", "broker"),
    "replication_bytes": ("replication_lag_bytes", "broker"),
    "replication_seconds": ("replication_lag_seconds", "broker"),
    "request_wait": ("request_wait_ms", "broker"),
    "half_messages": ("half_messages", "broker"),
}


def _level(metric: str, scope: str):
    return lambda rule, readings: readings.level(metric, scope)


def _stalled(rule, readings: Readings) -> dict[str, float | None]:
    # Lag is the figure compared; a group counts only while it consumes nothing (no TPS figure at
    # all: none). Either figure unknown this cycle makes the answer unknown.
    tps = readings.level("consume_tps", "group")
    out: dict[str, float | None] = {}
    for name, lag in readings.level("lag", "group").items():
        rate = tps.get(name, 0.0)
        if lag is None or rate is None:
            out[name] = None
        elif rate <= 0:
            out[name] = lag
    return out


# The broker-down rule looks back this far for members it knew: one forgotten longer ago is gone.
BROKER_MEMORY = timedelta(hours=24)


def no_data(rule: AlertRule, readings: Readings) -> str:
    """Why a firing event whose subject the rule no longer observes resolves: the subject's last
    figure is older than what the rule's measure reads back."""
    if rule.kind == "broker_down":
        horizon = BROKER_MEMORY
    elif KINDS[rule.kind].uses_window:
        horizon = timedelta(minutes=rule.window_minutes)
    else:
        horizon = readings.stale_after
    seconds = int(horizon.total_seconds())
    span = (
        f"{seconds} s"
        if seconds < 120
        else f"{seconds // 60} min"
        if seconds < 7200
        else f"{seconds // 3600} h"
    )
    return f"no data: no figure for over {span}"


MEASURES: dict[str, Callable[[AlertRule, Readings], Mapping[str, float | None]]] = {
    **{kind: _level(metric, scope) for kind, (metric, scope) in LEVELS.items()},
    "lag_growing": lambda rule, r: r.change_over("lag", "group", rule.window_minutes),
    "dlq_receiving": lambda rule, r: r.change_over(
        "dlq_messages", "group", rule.window_minutes, rises_only=True
    ),
    "consume_stalled": _stalled,
    "broker_down": lambda rule, r: r.seconds_since_up(BROKER_MEMORY),
}
assert set(MEASURES) == set(KINDS), "every kind of rule needs a measure"


def observe(rule, readings: Readings) -> list[Observation]:
    """The rule's figure for every subject of the cluster in its scope."""
    scope_name = {GROUP: "group", BROKER: "broker"}[KINDS[rule.kind].subject]
    out = []
    for name, value in MEASURES[rule.kind](rule, readings).items():
        subject = {"cluster": readings.cluster, scope_name: name}
        if rule.covers(subject):
            out.append(Observation(subject, value))
    return out
