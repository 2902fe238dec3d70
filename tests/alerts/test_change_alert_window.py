"""The rules that measure a change over their window ("Dead letters arriving", "Consumer group lag
growing") on cycles stored as the sampler stores them, 30 s apart (fake clock): each fires from
the first cycle that sees the change, holds while its window holds that cycle, and resolves at the
first cycle whose window holds it no more, even when cycles in between lack the group's figures
(its consume stats failed, or the whole cycle did)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import yaml

from alerts.models import AlertEvent, AlertRule
from alerts.prometheus_rules import prometheus_rules, rules_yaml
from tests.alerts.cycles import play_cycle, the_default_rule

GROUP = "g-payments-slow"
CYCLE = timedelta(seconds=30)
START = datetime(2026, 11, 20, tzinfo=UTC)  # where the fake clock starts


def dlq(count: int) -> dict[tuple[str, str, str], float]:
    return {("dlq_messages", "group", GROUP): float(count), ("lag", "group", GROUP): 100.0}


def lag(value: float) -> dict[tuple[str, str, str], float]:
    return {("lag", "group", GROUP): value, ("dlq_messages", "group", GROUP): 0.0}


def lag_figures(cycle: int, missing: tuple[int, ...]) -> dict[tuple[str, str, str], float]:
    """The lag 100 until cycle 41, 2,000 from then on; a cycle in ``missing`` has only another
    group's figures (the group's consume stats failed), cycle 45 none at all (the cycle failed)."""
    if cycle == 45:
        return {}
    if cycle in missing:
        return {("lag", "group", "g-other"): 5.0}
    return lag(2000 if cycle >= 41 else 100)


def timeline(rule: AlertRule) -> list[tuple[str, object, object, object]]:
    return list(
        AlertEvent.objects.filter(rule=rule, group=GROUP)
        .order_by("id")
        .values_list("state", "started_at", "firing_at", "resolved_at")
    )


def play(fake_clock, capture, rule: AlertRule, cycles: range, figures_at) -> dict[int, list[str]]:
    """Store cycle ``n`` of ``cycles`` at ``START + n * CYCLE`` (the fake clock's start) with
    ``figures_at(n)``; returns the states of the rule's events on the group after each cycle."""
    states = {}
    for cycle in cycles:
        fake_clock.moment = START + cycle * CYCLE
        play_cycle(capture, figures_at(cycle))
        states[cycle] = [state for state, *_ in timeline(rule)]
    return states


def test_dead_letters_fire_at_the_first_cycle_that_sees_them_and_resolve_when_the_window_holds_none(
    db, fake_clock, django_capture_on_commit_callbacks
):
    rule = the_default_rule("dlq_receiving")
    assert (rule.window_minutes, rule.for_minutes, rule.threshold) == (5, 0, 0)
    assert fake_clock.moment == START
    # Cycles 0..20 see no dead letters; 21 (10:30 after the start) sees 3; later ones still 3.
    # The group's figures are missing from cycle 11 (5 minutes before 21) and cycle 20 (just
    # before it), and cycle 25 stored nothing at all.
    arrived = START + 21 * CYCLE
    states = play(
        fake_clock,
        django_capture_on_commit_callbacks,
        rule,
        range(40),
        lambda cycle: {} if cycle in (11, 20, 25) else dlq(3 if cycle >= 21 else 0),
    )
    assert all(states[cycle] == [] for cycle in range(21))
    assert all(states[cycle] == ["firing"] for cycle in range(21, 31)), states
    assert timeline(rule) == [("resolved", arrived, arrived, arrived + timedelta(minutes=5))]
    # A second batch fires a new event at its own first cycle.
    fake_clock.moment = START + 40 * CYCLE
    play_cycle(django_capture_on_commit_callbacks, dlq(5))
    assert timeline(rule)[-1][:3] == ("firing", fake_clock.moment, fake_clock.moment)


def test_lag_growing_holds_from_the_first_cycle_that_sees_the_growth_until_it_leaves_the_window(
    db, fake_clock, django_capture_on_commit_callbacks
):
    rule = the_default_rule("lag_growing")
    assert (rule.window_minutes, rule.for_minutes, rule.threshold) == (10, 5, 1000)
    assert fake_clock.moment == START
    # The lag is 100 until cycle 41 (20:30 after the start) sees 2,000, and stays there. The
    # group's figures are missing from cycle 21 (10 minutes, one window, before 41), cycle 40 (just
    # before it), 53 (while firing) and 60 (the last cycle whose window holds 41); cycle
    # 45 stored nothing at all.
    grew = START + 41 * CYCLE
    missing = (21, 40, 45, 53, 60)
    states = play(
        fake_clock,
        django_capture_on_commit_callbacks,
        rule,
        range(62),
        lambda cycle: lag_figures(cycle, missing),
    )
    assert all(states[cycle] == [] for cycle in range(41)), states
    assert all(states[cycle] == ["pending"] for cycle in range(41, 51)), states
    assert all(states[cycle] == ["firing"] for cycle in range(51, 61)), states
    fired = grew + timedelta(minutes=5)
    assert timeline(rule) == [("resolved", grew, fired, grew + timedelta(minutes=10))]
    # The growth is the lag's net change over the window: a lag that goes up and down by 900 a
    # cycle (18 rises of 900 in a window, but never 1,000 above where it was) does not grow.
    states = play(
        fake_clock,
        django_capture_on_commit_callbacks,
        rule,
        range(62, 110),
        lambda cycle: lag(2900 if cycle % 2 else 2000),
    )
    assert all(states[cycle] == ["resolved"] for cycle in range(62, 110)), states


def test_the_exported_prometheus_rules_measure_the_change_as_the_console_rules_do(db, settings):
    """The rule file says each change-over-window rule as the console measures it. No Prometheus
    runs here (promtool is not installed), so what the expressions mean is argued in
    ``core.promql.change_over``; this checks the text the operator loads."""
    settings.HISTORY_SAMPLE_SECONDS = 30
    exported = yaml.safe_load(rules_yaml())
    expr = {rule["labels"]["kind"]: rule["expr"] for rule in exported["groups"][0]["rules"]}
    # The lag's net change: its newest scraped figure of the last 10 minutes minus its newest one
    # before them (range selectors skip the stale markers a scrape without the group leaves).
    assert expr["lag_growing"] == (
        "last_over_time(rocketmq_group_lag[10m]) - last_over_time(rocketmq_group_lag[10m] offset 10m) > 1000"
    )
    # Dead letters: each 30 s step of the last 5 minutes adds the count's rise since the step
    # before; a fall (retention removing dead letters) adds nothing, so it hides no arrival.
    assert expr["dlq_receiving"] == (
        "sum_over_time(clamp_min(last_over_time(rocketmq_group_dlq_messages[5m])"
        " - last_over_time(rocketmq_group_dlq_messages[5m] offset 30s), 0)[5m:30s]) > 0"
    )
    assert not any("delta(" in text for text in expr.values())
    # A group pattern scopes every selector of the expression.
    rule = AlertRule.objects.get(kind="lag_growing")
    rule.group_pattern = "orders-*"
    [exported_rule] = prometheus_rules([rule]).rules
    assert exported_rule["expr"].count('rocketmq_group_lag{group=~"orders-.*"}[10m]') == 2
