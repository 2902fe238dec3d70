""" "Dead letters arriving" on cycles stored as the sampler stores them, 30 s apart (fake clock):
it fires at the first cycle that sees new dead letters, stays firing while its window holds that
cycle, and resolves at the first cycle whose window holds none, even when cycles in between
lack the group's figures (its consume stats failed, or the whole cycle did)."""

from __future__ import annotations

from datetime import timedelta

from alerts.defaults import DEFAULT_RULES
from alerts.models import AlertEvent, AlertRule
from tests.alerts.cycles import play_cycle

GROUP = "g-payments-slow"
CYCLE = timedelta(seconds=30)


def dlq(count: int) -> dict[tuple[str, str, str], float]:
    return {("dlq_messages", "group", GROUP): float(count), ("lag", "group", GROUP): 100.0}


def the_default_rule(db) -> AlertRule:
    spec = next(r for r in DEFAULT_RULES if r["kind"] == "dlq_receiving")
    AlertRule.objects.exclude(name=spec["name"]).delete()  # only this rule's events
    return AlertRule.objects.get(name=spec["name"])


def timeline(rule: AlertRule) -> list[tuple[str, object, object, object]]:
    return list(
        AlertEvent.objects.filter(rule=rule, group=GROUP)
        .order_by("id")
        .values_list("state", "started_at", "firing_at", "resolved_at")
    )


def test_dead_letters_fire_at_the_first_cycle_that_sees_them_and_resolve_when_the_window_holds_none(
    db, fake_clock, django_capture_on_commit_callbacks
):
    rule = the_default_rule(db)
    assert (rule.window_minutes, rule.for_minutes, rule.threshold) == (5, 0, 0)
    start = fake_clock.moment
    # Cycles 0..20 see no dead letters; 21 (10:30 after the start) sees 3; later ones still 3.
    # The group's figures are missing from cycle 11 (5 minutes before 21) and cycle 20 (just
    # before it), and cycle 25 stored nothing at all.
    arrived = start + 21 * CYCLE
    states = {}
    for cycle in range(40):
        fake_clock.moment = start + cycle * CYCLE
        figures = {} if cycle in (11, 20, 25) else dlq(3 if cycle >= 21 else 0)
        play_cycle(django_capture_on_commit_callbacks, figures)
        states[cycle] = [state for state, *_ in timeline(rule)]
    assert all(states[cycle] == [] for cycle in range(21))
    assert all(states[cycle] == ["firing"] for cycle in range(21, 31)), states
    assert timeline(rule) == [("resolved", arrived, arrived, arrived + timedelta(minutes=5))]
    # A second batch fires a new event at its own first cycle.
    fake_clock.moment = start + 40 * CYCLE
    play_cycle(django_capture_on_commit_callbacks, dlq(5))
    assert timeline(rule)[-1][:3] == ("firing", fake_clock.moment, fake_clock.moment)
