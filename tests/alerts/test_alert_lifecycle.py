"""Rules evaluated on cycles stored as the sampler stores them (fake clock): events pending → firing →
resolved, one open event per rule and subject, one notification per transition and receiver,
silences, scopes, every kind of rule; webhook retries and their bound; e-mail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail

from alerts import delivery
from alerts.evaluation import evaluate
from alerts.models import AlertEvent, AlertRule, Notification, Silence
from project.celery import app as celery_app
from tests.alerts.cycles import CLUSTER, lag, play_cycle


def rule(kind="group_lag", threshold=10.0, for_minutes=3, **fields) -> AlertRule:
    fields.setdefault("name", f"{kind} {threshold} {AlertRule.objects.count()}")
    return AlertRule.objects.create(kind=kind, threshold=threshold, for_minutes=for_minutes, **fields)


@pytest.fixture
def no_defaults(db):
    AlertRule.objects.all().delete()  # the default rules of the migration would fire too


def states(r: AlertRule) -> list[str]:
    return list(AlertEvent.objects.filter(rule=r).order_by("id").values_list("state", flat=True))


def test_lag_rule_pending_then_firing_then_resolved_one_notification_each(
    no_defaults, eager, fake_clock, webhook, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=3, webhook_url=webhook.url)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    assert states(r) == ["pending"] and webhook.received == []
    fake_clock.advance(minutes=2)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 80))
    assert states(r) == ["pending"] and webhook.received == []
    fake_clock.advance(minutes=1)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 90))
    assert states(r) == ["firing"]
    fake_clock.advance(seconds=30)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 95))  # still firing: nothing new
    assert [m["status"] for m in webhook.received] == ["firing"]
    event = AlertEvent.objects.get(rule=r)
    assert event.value == 95 and event.group == "orders" and event.cluster == CLUSTER
    firing = webhook.received[0]
    assert firing["alerts"][0]["labels"] == {
        "alertname": r.name,
        "severity": "warning",
        "cluster": CLUSTER,
        "group": "orders",
    }
    assert firing["event"]["id"] == event.pk and firing["event"]["threshold"] == 10
    fake_clock.advance(seconds=30)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 0))
    assert states(r) == ["resolved"]
    assert [m["status"] for m in webhook.received] == ["firing", "resolved"]
    assert webhook.received[1]["alerts"][0]["endsAt"].startswith("2026-11-20T00:04:00")
    assert webhook.headers[0]["Idempotency-Key"] != webhook.headers[1]["Idempotency-Key"]
    # The lag comes back: a new event, not the old one reopened.
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 70))
    assert states(r) == ["resolved", "pending"]


def test_an_event_records_when_it_was_evaluated_and_the_figure_that_resolved_it(
    no_defaults, eager, fake_clock, django_capture_on_commit_callbacks
):
    r = rule(threshold=1500, for_minutes=1)
    for figure in (1522, 1530, 1522):  # pending, still pending, firing a minute on
        play_cycle(django_capture_on_commit_callbacks, lag("orders", figure))
        fake_clock.advance(seconds=30)
    firing = AlertEvent.objects.get(rule=r)
    assert firing.state == "firing" and firing.value == 1522
    assert firing.last_evaluated_at == firing.firing_at == fake_clock() - timedelta(seconds=30)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 1400))
    resolved = AlertEvent.objects.get(rule=r)
    assert resolved.state == "resolved" and resolved.resolution == ""
    assert resolved.value == 1400 and resolved.value_text == "1,400"
    assert resolved.last_evaluated_at == resolved.resolved_at == fake_clock()


def test_pending_that_clears_before_its_minutes_is_dropped(
    no_defaults, eager, fake_clock, webhook, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=5, webhook_url=webhook.url)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    fake_clock.advance(minutes=2)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 0))
    assert states(r) == [] and webhook.attempts == 0


def test_zero_minutes_fires_at_once_and_one_open_event_per_subject(
    no_defaults, eager, fake_clock, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=0)
    for _ in range(3):
        play_cycle(django_capture_on_commit_callbacks, {**lag("a", 20), **lag("b", 30), **lag("c", 1)})
        fake_clock.advance(seconds=30)
    assert sorted(AlertEvent.objects.filter(rule=r).values_list("group", "state")) == [
        ("a", "firing"),
        ("b", "firing"),
    ]
    assert not Notification.objects.exists()  # no receiver configured: nothing to notify


def test_silence_suppresses_and_a_firing_event_is_told_when_it_ends(
    no_defaults, eager, fake_clock, webhook, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=0, webhook_url=webhook.url)
    silence = Silence.objects.create(
        rule=r,
        group_pattern="ord*",
        starts_at=fake_clock(),
        ends_at=fake_clock() + timedelta(minutes=10),
        comment="deploy",
        created_by="t",
    )
    play_cycle(django_capture_on_commit_callbacks, {**lag("orders", 50), **lag("billing", 50)})
    assert [m["event"]["subject"]["group"] for m in webhook.received] == ["billing"]
    held = Notification.objects.get(event__group="orders")
    assert (
        held.status == Notification.SUPPRESSED and "deploy" not in held.detail and "silenced" in held.detail
    )
    fake_clock.advance(minutes=5)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))  # billing resolves: told
    assert [m["status"] for m in webhook.received] == ["firing", "resolved"]
    fake_clock.advance(minutes=6)  # the silence has ended, orders still fires: told now, once
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    assert [(m["status"], m["event"]["subject"]["group"]) for m in webhook.received][2:] == [
        ("firing", "orders")
    ]
    assert silence.pk


def test_resolution_while_silenced_is_not_sent(
    no_defaults, eager, fake_clock, webhook, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=0, webhook_url=webhook.url)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    Silence.objects.create(
        starts_at=fake_clock(), ends_at=fake_clock() + timedelta(hours=1), comment="x", created_by="t"
    )
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 0))
    assert [m["status"] for m in webhook.received] == ["firing"]
    assert Notification.objects.get(kind="resolved").status == Notification.SUPPRESSED
    assert states(r) == ["resolved"]


def test_scope_patterns_select_subjects(no_defaults, eager, fake_clock, django_capture_on_commit_callbacks):
    r = rule(for_minutes=0, group_pattern="orders-*")
    other_cluster = rule(for_minutes=0, cluster_pattern="10.0.0.*:9876")
    play_cycle(django_capture_on_commit_callbacks, {**lag("orders-eu", 50), **lag("billing", 50)})
    assert list(AlertEvent.objects.filter(rule=r).values_list("group", flat=True)) == ["orders-eu"]
    assert not AlertEvent.objects.filter(rule=other_cluster).exists()


def test_each_kind_of_rule(no_defaults, eager, fake_clock, django_capture_on_commit_callbacks):
    rules = {
        kind: rule(kind, threshold, for_minutes=0, window_minutes=5)
        for kind, threshold in [
            ("lag_growing", 100),
            ("dlq_receiving", 0),
            ("consume_stalled", 0),
            ("broker_down", 60),
            ("disk_ratio", 0.85),
            ("replication_bytes", 1000),
            ("replication_seconds", 30),
            ("request_wait", 100),
            ("half_messages", 10),
        ]
    }

    def broker(name, up=1.0, **figures):
        return {("up", "broker", name): up, **{(m, "broker", name): v for m, v in figures.items()}}

    healthy = {
        "disk_ratio": 0.5,
        "replication_lag_bytes": 0,
        "replication_lag_seconds": 0,
        "request_wait_ms": 1,
        "half_messages": 0,
    }
    sick = {
        "disk_ratio": 0.9,
        "replication_lag_bytes": 5000,
        "replication_lag_seconds": 40,
        "request_wait_ms": 150,
        "half_messages": 11,
    }
    groups = {
        ("dlq_messages", "group", "g-dlq"): 3,
        **lag("g-grow", 100),
        **lag("g-stalled", 5),
        **lag("g-busy", 5, consume_tps=20),
    }
    play_cycle(
        django_capture_on_commit_callbacks,
        {**groups, **broker("b:0", **healthy), **broker("c:0", **sick), **broker("gone:0")},
    )
    fake_clock.advance(minutes=1)
    groups.update({("dlq_messages", "group", "g-dlq"): 4, **lag("g-grow", 250)})
    play_cycle(django_capture_on_commit_callbacks, {**groups, **broker("b:0", up=0), **broker("c:0", **sick)})
    fake_clock.advance(seconds=61)  # "gone" is in no cycle any more; b answers nothing since 121 s
    play_cycle(django_capture_on_commit_callbacks, {**groups, **broker("b:0", up=0), **broker("c:0", **sick)})
    firing = {
        kind: sorted(AlertEvent.objects.filter(rule=r, state="firing").values_list("subject", flat=True))
        for kind, r in rules.items()
    }
    group, broker_ = f"cluster={CLUSTER}|group=", f"broker={{}}|cluster={CLUSTER}"
    assert firing == {
        "lag_growing": [group + "g-grow"],
        "dlq_receiving": [group + "g-dlq"],
        "consume_stalled": [group + "g-grow", group + "g-stalled"],
        "broker_down": [broker_.format("b:0"), broker_.format("gone:0")],
        "disk_ratio": [broker_.format("c:0")],
        "replication_bytes": [broker_.format("c:0")],
        "replication_seconds": [broker_.format("c:0")],
        "request_wait": [broker_.format("c:0")],
        "half_messages": [broker_.format("c:0")],
    }


def test_disabling_a_rule_resolves_its_events(
    no_defaults, eager, fake_clock, webhook, django_capture_on_commit_callbacks
):
    r = rule(for_minutes=0, webhook_url=webhook.url)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    AlertRule.objects.filter(pk=r.pk).update(enabled=False)
    fake_clock.advance(minutes=1)
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    event = AlertEvent.objects.get(rule=r)
    assert (event.state, event.resolution) == ("resolved", "rule disabled")
    assert [m["status"] for m in webhook.received] == ["firing", "resolved"]


# -- delivery -------------------------------------------------------------------------------------
def _queued_notification(fake_clock, url: str) -> Notification:
    r = rule(for_minutes=0, webhook_url=url)
    now = fake_clock()
    event = AlertEvent.objects.create(
        rule=r,
        rule_name=r.name,
        subject="g",
        group="g",
        state="firing",
        started_at=now,
        firing_at=now,
        last_evaluated_at=now,
        value=50,
    )
    return Notification.objects.create(
        event=event, kind="firing", channel="webhook", target=url, created_at=now
    )


def test_webhook_retried_after_a_500_then_delivered(no_defaults, fake_clock, webhook, settings):
    settings.ALERT_WEBHOOK_MAX_ATTEMPTS, settings.ALERT_WEBHOOK_BACKOFF_SECONDS = 4, 10
    settings.ALERT_WEBHOOK_BACKOFF_MAX_SECONDS = 25
    webhook.statuses = [500, 503]
    n = _queued_notification(fake_clock, webhook.url)
    assert delivery.attempt(n.pk) == delivery.Outcome("queued", 10)
    assert delivery.attempt(n.pk) == delivery.Outcome("queued", 20)
    assert delivery.attempt(n.pk) == delivery.Outcome("delivered")
    assert delivery.attempt(n.pk) == delivery.Outcome("delivered")  # a duplicate task sends nothing
    n.refresh_from_db()
    assert (n.status, n.attempts, webhook.attempts, len(webhook.received)) == ("delivered", 3, 3, 1)
    assert delivery.backoff(5) == 25  # capped


def test_webhook_given_up_after_the_bound(no_defaults, fake_clock, webhook, settings):
    settings.ALERT_WEBHOOK_MAX_ATTEMPTS = 3
    webhook.statuses = [500] * 10
    n = _queued_notification(fake_clock, webhook.url)
    outcomes = [delivery.attempt(n.pk).status for _ in range(4)]
    assert outcomes == ["queued", "queued", "failed", "failed"]
    n.refresh_from_db()
    assert n.status == "failed" and n.attempts == 3 and webhook.attempts == 3
    assert "gave up after 3 attempts" in n.last_error and "HTTP 500" in n.last_error


def test_unreachable_webhook_times_out_and_is_retried(no_defaults, fake_clock, settings):
    import socket

    settings.ALERT_WEBHOOK_TIMEOUT_SECONDS = 0.5
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        n = _queued_notification(fake_clock, f"http://127.0.0.1:{silent.getsockname()[1]}/")
        outcome = delivery.attempt(n.pk)
    assert outcome.status == "queued" and outcome.retry_in
    n.refresh_from_db()
    assert "timed out" in n.last_error


def test_celery_task_retries_until_delivered(no_defaults, eager, fake_clock, webhook):
    from alerts.tasks import deliver_notification

    webhook.statuses = [500, 500]
    n = _queued_notification(fake_clock, webhook.url)
    celery_app.conf.task_eager_propagates = False  # eager retries are run by apply(), not raised
    deliver_notification.delay(n.pk)
    n.refresh_from_db()
    assert (n.status, n.attempts, len(webhook.received)) == ("delivered", 3, 1)


def test_email_notifications(no_defaults, eager, fake_clock, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.ALERT_EMAIL_TO = ["oncall@example.com"]
    rule(for_minutes=0, email_to="team@example.com, oncall@example.com", name="Orders lag")
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 50))
    play_cycle(django_capture_on_commit_callbacks, lag("orders", 0))
    assert [m.subject for m in mail.outbox] == [
        "[FIRING] Orders lag: cluster 127.0.0.1:9876 group orders",
        "[RESOLVED] Orders lag: cluster 127.0.0.1:9876 group orders",
    ]
    assert mail.outbox[0].to == ["team@example.com", "oncall@example.com"]
    assert "Value: 50" in mail.outbox[0].body and "/alerts/events/" in mail.outbox[0].body


def test_default_rules_exist_after_migrations(db):
    names = set(AlertRule.objects.values_list("name", flat=True))
    assert {"Consumer group lag", "Broker down", "Disk almost full", "Dead letters arriving"} <= names
    assert {r.kind for r in AlertRule.objects.all()} == set(
        __import__("alerts.kinds", fromlist=["KINDS"]).KINDS
    )


def test_evaluate_is_callable_directly(no_defaults, fake_clock, django_capture_on_commit_callbacks):
    rule(for_minutes=0)
    report = evaluate(fake_clock(), CLUSTER)
    assert (report.rules, report.subjects, report.opened) == (1, 0, 0)
