"""Evaluating the enabled rules on one cluster's metric history, moving events along their lifecycle.

A rule's condition true on a subject opens a *pending* event; once it has held for the rule's
``for_minutes`` the event is *firing* (a notification goes out); when the condition is false again a
firing event is *resolved* (a second notification), a pending one is dropped (it never fired, as in
Prometheus). At most one open event per rule and subject exists (a unique index says so too).

A subject whose figure is unknown this cycle but recent (``alerts.observe``) changes nothing: its
open event neither fires nor resolves, and none opens. One the rule no longer observes at all has
no data: its event resolves saying so (``observe.no_data``), as Grafana's "no data" state does.

``evaluate(now, cluster)`` runs after every sampling cycle (``core.signals.sample_stored``) and
is what tests call with a fake clock. Its cost: a fixed number of queries (rules, open events,
silences, one or two reads per distinct metric, bulk writes), whatever the number of groups.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from core import clock, metric_history
from core.cluster_access import namesrv_choices

from . import notify
from .kinds import KINDS
from .models import AlertEvent, AlertRule, Notification, Silence
from .observe import no_data, observe

log = logging.getLogger(__name__)


@dataclass
class EvaluationReport:
    cluster: str
    now: datetime
    rules: int = 0
    subjects: int = 0
    opened: int = 0
    fired: int = 0
    resolved: int = 0
    dropped: int = 0
    notifications: list[int] = field(default_factory=list)
    history_reads: int = 0


def subject_key(subject: dict[str, str]) -> str:
    return "|".join(f"{name}={subject[name]}" for name in sorted(subject))


def summary_of(rule: AlertRule, subject: dict[str, str], value: float) -> str:
    kind = KINDS[rule.kind]
    what = " ".join(f"{k} {v}" for k, v in subject.items() if k != "cluster")
    text = f"{kind.label} {kind.format(rule.threshold)}: {what} at {kind.format(value)}"
    return f"{text} ({kind.threshold_label})"[:500]


def evaluate(now: datetime | None = None, cluster: str | None = None) -> EvaluationReport:
    now = now or clock.now()
    cluster = cluster or next(iter(namesrv_choices()), "")  # the first name server by default
    report = EvaluationReport(cluster, now)
    with transaction.atomic():
        _evaluate(now, cluster, report)
    return report


def _evaluate(now: datetime, cluster: str, report: EvaluationReport) -> None:
    rules = list(AlertRule.objects.filter(enabled=True))
    report.rules = len(rules)
    open_events = {
        (e.rule_id, e.subject): e
        for e in AlertEvent.objects.filter(state__in=AlertEvent.OPEN_STATES, cluster=cluster).select_related(
            "rule"
        )
    }
    silences = list(Silence.objects.filter(starts_at__lte=now, ends_at__gt=now))
    readings = metric_history.required().readings(cluster, now)
    batch = _Batch()
    for rule in rules:
        for obs in observe(rule, readings):
            report.subjects += 1
            key = (rule.pk, subject_key(obs.subject))
            batch.observed.add(key)
            if obs.value is None:
                batch.seen.add(key)  # unknown this cycle: whatever event there is stays as it is
            elif obs.value > rule.threshold:
                batch.holds(rule, obs, open_events, now)
            else:
                batch.below[key] = obs.value
    for open_key, event in open_events.items():
        if open_key not in batch.seen:
            why = "" if open_key in batch.observed or event.rule is None else no_data(event.rule, readings)
            batch.clears(event, now, why, batch.below.get(open_key))
    report.opened, report.dropped = len(batch.created), len(batch.dropped)
    report.fired = sum(kind == Notification.FIRING for _, kind in batch.transitions)
    report.resolved = len(batch.transitions) - report.fired
    batch.write(now)
    report.notifications = notify.for_transitions(batch.transitions, silences, now)
    report.notifications += notify.release_unsilenced(cluster, silences, now)
    report.history_reads = readings.queries
    _forget_old_resolved(now)


class _Batch:
    """The changes of one evaluation, written at its end with a bounded number of queries."""

    def __init__(self) -> None:
        self.created: list[AlertEvent] = []
        self.still: list[AlertEvent] = []  # open events whose condition still holds
        self.revalued: list[AlertEvent] = []  # ... of them, those whose figure moved
        self.dropped: list[int] = []  # pending events whose condition went before they fired
        self.transitions: list[tuple[AlertEvent, str]] = []
        self.seen: set[tuple[int | None, str]] = set()  # open events to leave open
        self.observed: set[tuple[int | None, str]] = set()  # (rule, subject) with a figure, known or not
        self.below: dict[tuple[int | None, str], float] = {}  # known figures not above the threshold

    def holds(self, rule: AlertRule, obs, open_events: dict, now: datetime) -> None:
        key = (rule.id, subject_key(obs.subject))
        self.seen.add(key)
        event = open_events.get(key)
        if event is None:
            event = _new_event(rule, obs.subject, key[1], obs.value, now)
            self.created.append(event)
        else:
            self.still.append(event)
            # On the object too: a transition of it is written from the object (write()).
            event.last_evaluated_at = now
            if event.value != obs.value:
                event.value = obs.value
                self.revalued.append(event)
        if event.state == AlertEvent.PENDING and now - event.started_at >= timedelta(
            minutes=rule.for_minutes
        ):
            event.state, event.firing_at = AlertEvent.FIRING, now
            event.summary = summary_of(rule, obs.subject, obs.value)  # as it was when it fired
            self.transitions.append((event, Notification.FIRING))

    def clears(self, event: AlertEvent, now: datetime, why: str = "", figure: float | None = None) -> None:
        """``why``: the resolution when the rule still runs ("" when its condition is false, "no
        data..." when its subject has no figure); ``figure``: the subject's, when it has one."""
        if event.state == AlertEvent.PENDING:
            self.dropped.append(event.id)  # it never fired: nobody was told, nothing to resolve
            return
        if event.rule is None or not event.rule.enabled:
            reason = "rule deleted" if event.rule is None else "rule disabled"
        else:
            # The figure that resolved it, or none (no data): never the last one above the threshold.
            reason, event.value = why, figure
        _resolve(event, now, reason)
        self.transitions.append((event, Notification.RESOLVED))

    def write(self, now: datetime) -> None:
        # Sized by what changed: the evaluation time of every open event in one UPDATE, the figures
        # that moved in one bulk update of that column, the few transitions with all their columns.
        AlertEvent.objects.filter(id__in=self.dropped).delete()
        AlertEvent.objects.bulk_create(self.created)
        AlertEvent.objects.filter(id__in=[e.id for e in self.still]).update(last_evaluated_at=now)
        AlertEvent.objects.bulk_update(self.revalued, ["value"])
        new = {id(e) for e in self.created}
        moved = [event for event, _ in self.transitions if id(event) not in new]
        AlertEvent.objects.bulk_update(
            moved,
            ["state", "summary", "value", "last_evaluated_at", "firing_at", "resolved_at", "resolution"],
        )


def _new_event(rule: AlertRule, subject: dict[str, str], key: str, value: float, now: datetime) -> AlertEvent:
    return AlertEvent(
        rule=rule,
        rule_name=rule.name,
        severity=rule.severity,
        subject=key,
        cluster=subject.get("cluster", ""),
        broker=subject.get("broker", ""),
        group=subject.get("group", ""),
        state=AlertEvent.PENDING,
        value=value,
        threshold=rule.threshold,
        summary=summary_of(rule, subject, value),
        started_at=now,
        last_evaluated_at=now,
    )


def _resolve(event: AlertEvent, now: datetime, reason: str = "") -> None:
    event.state, event.resolved_at, event.last_evaluated_at = AlertEvent.RESOLVED, now, now
    event.resolution = reason


def close_events_of(rule: AlertRule, reason: str) -> list[int]:
    """Resolve (or drop, when pending) the open events of a rule being disabled or deleted, with a
    resolved notification for those that fired; returns the notifications queued."""
    now = clock.now()
    with transaction.atomic():
        events = list(AlertEvent.objects.filter(rule=rule, state__in=AlertEvent.OPEN_STATES))
        AlertEvent.objects.filter(id__in=[e.id for e in events if e.state == AlertEvent.PENDING]).delete()
        firing = [e for e in events if e.state == AlertEvent.FIRING]
        for event in firing:
            _resolve(event, now, reason)
        AlertEvent.objects.bulk_update(firing, ["state", "resolved_at", "last_evaluated_at", "resolution"])
        silences = list(Silence.objects.filter(starts_at__lte=now, ends_at__gt=now))
        return notify.for_transitions([(e, Notification.RESOLVED) for e in firing], silences, now)


def _forget_old_resolved(now: datetime) -> None:
    horizon = now - timedelta(days=settings.ALERT_RESOLVED_RETENTION_DAYS)
    AlertEvent.objects.filter(state=AlertEvent.RESOLVED, resolved_at__lt=horizon).delete()
