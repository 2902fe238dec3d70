"""The alert pages: viewers read, operators change (rules, acknowledgements, silences), every change
audited, refusals a 403 that says why; validation of patterns and receivers; the header badge."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.urls import reverse

from alerts.models import AlertEvent, AlertRule, Silence
from core.models import AuditRecord
from tests.cluster import logged_in_client

PASSWORD = "correct horse battery staple 42"
viewer = logged_in_client("vic", "viewer", PASSWORD)
operator = logged_in_client("ora", "operator", PASSWORD)

RULE = {
    "name": "Orders lag",
    "kind": "group_lag",
    "enabled": "on",
    "severity": "critical",
    "threshold": "500",
    "for_minutes": "5",
    "window_minutes": "10",
    "cluster_pattern": "",
    "broker_pattern": "",
    "group_pattern": "orders-*",
    "webhook_url": "",
    "email_to": "",
    "description": "",
}


def firing_event(fake_clock, rule: AlertRule | None = None, group="orders-eu") -> AlertEvent:
    rule = rule or AlertRule.objects.get(name="Consumer group lag")
    now = fake_clock()
    return AlertEvent.objects.create(
        rule=rule,
        rule_name=rule.name,
        subject=f"group={group}",
        group=group,
        cluster="127.0.0.1:9876",
        state="firing",
        started_at=now,
        firing_at=now,
        last_evaluated_at=now,
        value=900,
        threshold=500,
    )


def test_viewer_reads_every_page_and_cannot_change_rules(viewer, fake_clock):
    event = firing_event(fake_clock)
    rule = AlertRule.objects.get(name="Consumer group lag")
    for url in (
        reverse("alerts:events"),
        reverse("alerts:rules"),
        reverse("alerts:silences"),
        reverse("alerts:event_detail", args=[event.pk]),
        reverse("alerts:events") + "?state=all",
    ):
        page = viewer.get(url)
        assert page.status_code == 200, url
        assert "New rule" not in page.content.decode() and "Acknowledge</button>" not in page.content.decode()
    refused = [
        viewer.post(reverse("alerts:rule_create"), RULE),
        viewer.post(reverse("alerts:rule_edit", args=[rule.pk]), {**RULE, "name": rule.name}),
        viewer.post(reverse("alerts:rule_delete", args=[rule.pk])),
        viewer.post(reverse("alerts:event_acknowledge", args=[event.pk]), {"note": "mine"}),
        viewer.post(reverse("alerts:silence_create"), {"comment": "x", "ends_at": "2026-11-20 02:00"}),
        viewer.get(reverse("alerts:rule_create")),
    ]
    assert [r.status_code for r in refused] == [403] * 6
    assert "needs the operator role" in refused[0].content.decode()
    assert (
        AlertRule.objects.get(pk=rule.pk).threshold == rule.threshold
        and not AlertRule.objects.filter(name="Orders lag").exists()
    )
    denied = AuditRecord.objects.filter(result="denied", username="vic").values_list("action", flat=True)
    assert sorted(denied) == sorted(
        [
            "alerts.rule.save",
            "alerts.rule.save",
            "alerts.rule.delete",
            "alerts.event.acknowledge",
            "alerts.silence.create",
        ]
    )


def test_operator_creates_edits_disables_and_deletes_a_rule(operator, fake_clock):
    assert operator.post(reverse("alerts:rule_create"), RULE).status_code == 302
    rule = AlertRule.objects.get(name="Orders lag")
    assert (rule.group_pattern, rule.threshold, rule.updated_by) == ("orders-*", 500, "ora")
    firing_event(fake_clock, rule)
    edit = {**RULE, "threshold": "800"}
    del edit["enabled"]  # unchecked: disabled, its firing event resolves
    assert operator.post(reverse("alerts:rule_edit", args=[rule.pk]), edit).status_code == 302
    rule.refresh_from_db()
    assert (rule.threshold, rule.enabled) == (800, False)
    assert AlertEvent.objects.get(rule=rule).resolution == "rule disabled"
    page = operator.get(reverse("alerts:rules")).content.decode()
    assert "Orders lag" in page and "Delete" in page
    assert operator.post(reverse("alerts:rule_delete", args=[rule.pk])).status_code == 302
    assert not AlertRule.objects.filter(pk=rule.pk).exists()
    assert AlertEvent.objects.get(rule_name="Orders lag").rule is None  # the history stays
    records = AuditRecord.objects.filter(username="ora").order_by("id")
    assert [(r.action, r.target, r.result, r.detail) for r in records] == [
        ("alerts.rule.save", "Orders lag", "ok", "created"),
        ("alerts.rule.save", "Orders lag", "ok", "updated"),
        ("alerts.rule.delete", "Orders lag", "ok", f"Rule 'Orders lag' (id {rule.pk}) deleted"),
    ]
    assert records[1].parameters == {"threshold": "800", "enabled": ""}


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"group_pattern": "orders/[a-z]"}, "use letters, digits"),
        ({"group_pattern": "x" * 129}, "at most 128"),
        ({"broker_pattern": "broker-a*"}, "a group rule has no broker"),
        ({"kind": "disk_ratio", "group_pattern": "", "threshold": "85"}, "ratio between 0 and 1"),
        ({"webhook_url": "file:///etc/passwd"}, "Enter a valid URL"),
        ({"email_to": "ops@example.com, not-an-address"}, "valid email"),
        ({"threshold": "-1"}, "greater than or equal to 0"),
        ({"window_minutes": "5000"}, "at most 1440"),
        ({"name": "Consumer group lag"}, "already exists"),
    ],
)
def test_rule_validation(operator, change, error):
    response = operator.post(reverse("alerts:rule_create"), {**RULE, **change})
    assert response.status_code == 400
    assert error in response.content.decode()
    assert AuditRecord.objects.get(action="alerts.rule.save").result == "failed"


def test_acknowledge_with_a_note_and_the_badge(operator, fake_clock):
    event = firing_event(fake_clock)
    firing_event(fake_clock, group="billing")
    assert 'data-alerts-firing="2"' in _badge(operator)
    url = reverse("alerts:event_acknowledge", args=[event.pk])
    assert operator.post(url, {"note": ""}).status_code == 400  # a note is required
    assert operator.post(url, {"note": "scaling consumers"}).status_code == 302
    event.refresh_from_db()
    assert (event.acknowledged_by, event.ack_note, event.state) == ("ora", "scaling consumers", "firing")
    assert 'data-alerts-firing="1"' in _badge(operator)
    assert operator.post(url, {"note": "again"}).status_code == 400  # once only
    assert (
        "scaling consumers" in operator.get(reverse("alerts:event_detail", args=[event.pk])).content.decode()
    )
    unacked = operator.get(reverse("alerts:events") + "?state=firing&unacknowledged=1").content.decode()
    assert "billing" in unacked and "orders-eu" not in unacked
    assert AuditRecord.objects.filter(action="alerts.event.acknowledge", result="ok").count() == 1


def _badge(client) -> str:
    from django.contrib.auth.models import User

    request = RequestFactory().get("/")
    request.user = User.objects.get(username="ora")
    return render_to_string("alerts/_badge.html", request=request)


def test_badge_is_one_query_and_hidden_without_a_role(db, django_assert_num_queries):
    from django.contrib.auth.models import AnonymousUser

    from alerts.context_processors import alerts_badge

    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert alerts_badge(request) == {"alerts_badge": None}
    assert render_to_string("alerts/_badge.html", {"alerts_badge": None}).strip() == ""
    from alerts.context_processors import AlertBadge

    badge = AlertBadge()
    with django_assert_num_queries(1):
        assert badge.firing == 0 and badge.firing == 0


def test_silence_from_an_event_then_ended_early(operator, fake_clock):
    event = firing_event(fake_clock)
    form = operator.get(reverse("alerts:silence_create") + f"?event={event.pk}").content.decode()
    assert 'value="orders-eu"' in form  # offered for this event's subject
    ends = (fake_clock() + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M")
    data = {
        "rule": event.rule_id,
        "group_pattern": "orders-eu",
        "cluster_pattern": "",
        "broker_pattern": "",
        "ends_at": ends,
        "comment": "consumer redeploy",
    }
    assert (
        operator.post(reverse("alerts:silence_create"), {**data, "ends_at": "2020-01-01 00:00"}).status_code
        == 400
    )
    assert operator.post(reverse("alerts:silence_create"), data).status_code == 302
    silence = Silence.objects.get()
    assert silence.silences(event, fake_clock()) and silence.created_by == "ora"
    assert (
        "consumer redeploy" in operator.get(reverse("alerts:event_detail", args=[event.pk])).content.decode()
    )
    assert operator.post(reverse("alerts:silence_expire", args=[silence.pk])).status_code == 302
    silence.refresh_from_db()
    assert not silence.silences(event, fake_clock())
    actions = AuditRecord.objects.filter(username="ora", result="ok").values_list("action", flat=True)
    assert list(actions.order_by("id")) == ["alerts.silence.create", "alerts.silence.expire"]


def test_missing_objects_are_404_and_audited(operator):
    assert operator.post(reverse("alerts:rule_delete", args=[999])).status_code == 404
    assert operator.post(reverse("alerts:silence_expire", args=[999])).status_code == 404
    assert operator.get(reverse("alerts:event_detail", args=[999])).status_code == 404
    assert AuditRecord.objects.filter(result="failed").count() == 2


def test_an_edited_threshold_and_window_change_the_description_and_the_prometheus_rule(operator):
    """The rule's description is said from its fields: the rules page and the exported Prometheus
    rule follow an edit, never an older copy of the numbers."""
    rule = AlertRule.objects.get(name="Consumer group lag growing")
    edited = {**RULE, "name": rule.name, "kind": rule.kind, "threshold": "2500", "for_minutes": "3"}
    edited.update(window_minutes="20", group_pattern="", description=rule.description)
    assert operator.post(reverse("alerts:rule_edit", args=[rule.pk]), edited).status_code == 302

    page = operator.get(reverse("alerts:rules")).content.decode()
    row = page.split(f"<td>{rule.name}", 1)[1].split("</tr>")[0]
    assert "2,500" in row and "20 min" in row and "3 min" in row
    assert "1,000" not in row and "10 min" not in row and "5 min" not in row
    exported = yaml.safe_load(operator.get(reverse("console:export_prometheus_rules")).content)
    [prometheus] = [r for r in exported["groups"][0]["rules"] if r["labels"]["console_rule"] == rule.name]
    lag_change = (
        "last_over_time(rocketmq_group_lag[20m]) - last_over_time(rocketmq_group_lag[20m] offset 20m)"
    )
    assert prometheus["expr"] == f"{lag_change} > 2500" and prometheus["for"] == "3m"
    description = prometheus["annotations"]["description"]
    assert "2,500" in description and "20 min" in description and "3 min" in description
    assert "1,000" not in description and "10 min" not in description


def _deepest_parenthesis(text: str) -> int:
    depth = deepest = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        deepest = max(deepest, depth)
    return deepest


def test_exported_descriptions_nest_no_parentheses(operator):
    """Each kind's threshold wording is said inside one pair of parentheses in a description: it
    holds none of its own ("messages behind, with 0 consume TPS")."""
    exported = yaml.safe_load(operator.get(reverse("console:export_prometheus_rules")).content)
    descriptions = {r["alert"]: r["annotations"]["description"] for r in exported["groups"][0]["rules"]}
    assert "Consumer not consuming" in {r["labels"]["console_rule"] for r in exported["groups"][0]["rules"]}
    nested = {name: text for name, text in descriptions.items() if _deepest_parenthesis(text) > 1}
    assert nested == {}


def test_a_default_rule_keeping_its_first_description_gets_the_note_instead(db):
    """Migration 0004: the default rules' first descriptions said their figures; each becomes the
    figure-free note of alerts.defaults, and a description an operator wrote stays."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("alerts.migrations.0004_descriptions_are_notes")
    stale = migration.STALE["Disk almost full"]
    AlertRule.objects.filter(name="Disk almost full").update(description=stale)
    AlertRule.objects.filter(name="Broker down").update(description="Page the on-call at 60 s.")
    migration.to_notes(apps, None)
    assert AlertRule.objects.get(name="Disk almost full").description == (
        "The broker refuses writes above diskSpaceWarningLevelRatio (90% by default)."
    )
    assert AlertRule.objects.get(name="Broker down").description == "Page the on-call at 60 s."
