"""The rules that compare a subject's newest figure with their threshold (lag, not consuming, disk,
...) on cycles stored as the sampler stores them, 30 s apart (fake clock), when some cycles lack
the subject's figure (its stats failed, the broker stopped answering, a cycle stored nothing): an
event keeps its state while the last figure is at most STALE_CYCLES (core.clock) sampling
intervals old (90 s), neither firing nor resolving on a cycle without a figure, and resolves as
"no data" after that; so a missing figure makes no second notification. "Broker down" fires on the
same cycles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from alerts.models import AlertEvent, AlertRule
from tests.alerts.cycles import play_cycle, the_default_rule

CYCLE = timedelta(seconds=30)
START = datetime(2026, 11, 20, tzinfo=UTC)  # where the fake clock starts
GROUP, BROKER = "g-orders", "broker-a:0"
NO_DATA = "no data: no figure for over 90 s"


def at(cycle: int) -> datetime:
    return START + cycle * CYCLE


def timeline(rule: AlertRule) -> list[tuple[str, object, object, object, str]]:
    return list(
        AlertEvent.objects.filter(rule=rule)
        .order_by("id")
        .values_list("state", "started_at", "firing_at", "resolved_at", "resolution")
    )


def play(fake_clock, capture, rules: list[AlertRule], cycles: range, figures_at) -> dict[int, list]:
    """Store cycle ``n`` at ``at(n)`` with ``figures_at(n)``; returns, after each cycle, the states
    of each rule's events."""
    states = {}
    for cycle in cycles:
        fake_clock.moment = at(cycle)
        play_cycle(capture, figures_at(cycle))
        states[cycle] = [[state for state, *_ in timeline(rule)] for rule in rules]
    return states


@pytest.fixture
def receiver(eager, settings, webhook):
    settings.HISTORY_SAMPLE_SECONDS = 30
    settings.ALERT_WEBHOOK_URLS = [webhook.url]
    return webhook


def told(webhook) -> list[tuple[str, str, str]]:
    return [(m["event"]["kind"], m["status"], m["event"]["resolution"]) for m in webhook.received]


def group_figures(cycle: int) -> dict[tuple[str, str, str], float]:
    """The group 20,000 behind and consuming nothing; its stats failed at cycles 4, 10 (when the
    rules would fire), 15 (firing), 25 to 27 (three in a row) and 40 on; cycle 20 stored nothing."""
    if cycle == 20:
        return {}
    other = {("lag", "group", "g-other"): 5.0, ("consume_tps", "group", "g-other"): 1.0}
    if cycle in (4, 10, 15, 25, 26, 27) or cycle >= 40:
        return other
    return {**other, ("lag", "group", GROUP): 20_000.0, ("consume_tps", "group", GROUP): 0.0}


def test_a_group_missing_from_cycles_keeps_its_event_then_resolves_as_no_data(
    db, fake_clock, receiver, django_capture_on_commit_callbacks
):
    lag_rule = the_default_rule("group_lag", "consume_stalled")
    stalled_rule = AlertRule.objects.get(kind="consume_stalled")
    for rule in (lag_rule, stalled_rule):
        assert (rule.for_minutes, rule.threshold) in ((5, 10_000), (5, 0))
    states = play(
        fake_clock,
        django_capture_on_commit_callbacks,
        [lag_rule, stalled_rule],
        range(44),
        group_figures,
    )
    # Pending from cycle 0; at 10, five minutes on, no figure: still pending, firing at 11.
    assert all(states[cycle] == [["pending"]] * 2 for cycle in range(11)), states
    # Firing through the cycles without the group's figure, the empty cycle 20 and 25 to 27 (the
    # last figure, of 24, 90 s old at 27); at 43 the last figure (of 39) is 120 s old: no data.
    assert all(states[cycle] == [["firing"]] * 2 for cycle in range(11, 43)), states
    assert states[43] == [["resolved"]] * 2
    for rule in (lag_rule, stalled_rule):
        assert timeline(rule) == [("resolved", at(0), at(11), at(43), NO_DATA)]
        resolved = AlertEvent.objects.get(rule=rule)  # no figure resolved it: none is shown
        assert resolved.value is None and resolved.value_text == "none"
    sent = told(receiver)  # the two rules' notifications of one cycle in either order
    assert [sorted(sent[:2]), sorted(sent[2:])] == [
        [("consume_stalled", "firing", ""), ("group_lag", "firing", "")],
        [("consume_stalled", "resolved", NO_DATA), ("group_lag", "resolved", NO_DATA)],
    ]
    # The figure comes back: a new event, pending from its own cycle.
    fake_clock.moment = at(44)
    play_cycle(django_capture_on_commit_callbacks, {**group_figures(0)})
    assert timeline(lag_rule)[-1] == ("pending", at(44), None, None, "")


def broker_figures(cycle: int) -> dict[tuple[str, str, str], float]:
    """The broker's disk 90% full; cycle 11 (firing) lacks its disk figure; it stops answering at cycle 13
    (stored as down, with no disk figure) and answers again at 20; cycle 17 stored nothing."""
    if cycle == 17:
        return {}
    if 13 <= cycle < 20:
        heard = float((cycle - 12) * 30)
        return {("up", "broker", BROKER): 0.0, ("last_heard_seconds", "broker", BROKER): heard}
    up = {("up", "broker", BROKER): 1.0, ("last_heard_seconds", "broker", BROKER): 0.0}
    return up if cycle == 11 else {**up, ("disk_ratio", "broker", BROKER): 0.9}


def test_a_broker_that_stops_answering_fires_broker_down_and_its_disk_alert_ends_as_no_data(
    db, fake_clock, receiver, django_capture_on_commit_callbacks
):
    disk_rule = the_default_rule("disk_ratio", "broker_down")
    down_rule = AlertRule.objects.get(kind="broker_down")
    assert (disk_rule.for_minutes, disk_rule.threshold) == (5, 0.85)
    assert (down_rule.for_minutes, down_rule.threshold) == (0, 60)
    states = play(
        fake_clock, django_capture_on_commit_callbacks, [disk_rule, down_rule], range(21), broker_figures
    )
    assert all(states[cycle] == [["pending"], []] for cycle in range(10)), states
    assert all(states[cycle] == [["firing"], []] for cycle in range(10, 15)), states
    # Down since 13: "Broker down" fires when last heard over 60 s ago (15), through the empty
    # cycle 17; the disk event keeps firing until its figure (of 12) is over 90 s old (16).
    assert states[15] == [["firing"], ["firing"]]
    assert all(states[cycle] == [["resolved"], ["firing"]] for cycle in range(16, 20)), states
    assert states[20] == [["resolved", "pending"], ["resolved"]]
    assert timeline(disk_rule) == [
        ("resolved", at(0), at(10), at(16), NO_DATA),
        ("pending", at(20), None, None, ""),
    ]
    assert timeline(down_rule) == [("resolved", at(15), at(15), at(20), "")]
    assert told(receiver) == [
        ("disk_ratio", "firing", ""),
        ("broker_down", "firing", ""),
        ("disk_ratio", "resolved", NO_DATA),
        ("broker_down", "resolved", ""),
    ]
