"""Every replay is audited and traced alike: each message of a bulk replay (the Celery job) gets its
``dlq.replay`` record as a single replay does, so the message trace shows it; a refused replay (no
role, bad input) is audited under the same ``dlq.replay`` name as a successful one."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from console.models import ReplayJob
from core.models import AuditRecord
from tests.cluster import make_dead_letters

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "OpsBulkTraced", "ops-bulk-traced"


@pytest.fixture(scope="module")
def dead_letters(cluster):
    make_dead_letters(cluster, TOPIC, GROUP, 3, keys="bulk")
    return GROUP


@pytest.fixture
def rows(namesrv, dead_letters, operator_client):
    operator_client.post(reverse("console:dlq_make_readable", kwargs={"group": GROUP}))
    return operator_client.get(reverse("console:dlq_list", kwargs={"group": GROUP})).context["rows"]


def _replay_events(client, msg_id: str) -> list:
    response = client.get(reverse("console:trace"), {"msgId": msg_id, "topic": TOPIC})
    assert response.status_code == 200, response.content
    return [item["event"] for item in response.context["events"] if item["event"].kind == "replay"]


@pytest.mark.parametrize("scope", ["selected", "all"])
def test_bulk_replay_is_in_each_message_trace(scope, rows, operator_client, eager_celery):
    form = {"scope": scope, "target": "retry"}
    if scope == "selected":
        form["ids"] = [r["offset_msg_id"] for r in rows[:2]]
    response = operator_client.post(reverse("console:dlq_replay", kwargs={"group": GROUP}), form)
    assert response.status_code == 302
    job = ReplayJob.objects.get()
    replayed = rows[:2] if scope == "selected" else rows
    assert (job.status, job.sent) == ("done", len(replayed))
    for row in replayed:
        (event,) = _replay_events(operator_client, row["msg_id"])
        assert event.ok and event.title == f"Replayed by otto-operator to %RETRY%{GROUP}"
        assert event.detail["new msgId"]
        record = AuditRecord.objects.get(action="dlq.replay", parameters__msgId=row["msg_id"])
        assert record.parameters["job"] == job.pk and record.parameters["offsetMsgId"] == row["offset_msg_id"]
    if scope == "selected":
        assert _replay_events(operator_client, rows[2]["msg_id"]) == []


def test_single_and_bulk_replays_are_traced_alike(rows, operator_client, eager_celery):
    url = reverse("console:dlq_replay", kwargs={"group": GROUP})
    row = rows[0]
    operator_client.post(url, {"scope": "one", "ids": row["offset_msg_id"], "target": "retry"})
    operator_client.post(url, {"scope": "selected", "ids": [row["offset_msg_id"]], "target": "retry"})
    single, bulk = AuditRecord.objects.filter(action="dlq.replay", parameters__msgId=row["msg_id"]).order_by(
        "id"
    )
    assert single.parameters.keys() - {"scope"} == bulk.parameters.keys() - {"scope", "job"}
    assert [e.title for e in _replay_events(operator_client, row["msg_id"])] == [
        f"Replayed by otto-operator to %RETRY%{GROUP}"
    ] * 2


def test_refused_replays_are_audited_under_the_same_name(rows, viewer, operator_client):
    viewer_client = Client()  # the fixture's client is the operator's
    viewer_client.force_login(viewer)
    url = reverse("console:dlq_replay", kwargs={"group": GROUP})
    denied = viewer_client.post(url, {"scope": "one", "ids": rows[0]["offset_msg_id"], "target": "retry"})
    assert denied.status_code == 403
    refused = operator_client.post(
        url, {"scope": "one", "ids": rows[0]["offset_msg_id"], "target": "nowhere"}
    )
    assert refused.status_code == 400
    ok = operator_client.post(url, {"scope": "one", "ids": rows[0]["offset_msg_id"], "target": "retry"})
    assert ok.status_code == 200
    records = AuditRecord.objects.filter(target__contains=GROUP).exclude(action="dlq.make_readable")
    assert sorted((r.action, r.result) for r in records) == [
        ("dlq.replay", "denied"),
        ("dlq.replay", "failed"),
        ("dlq.replay", "ok"),
    ]
    readable_denied = viewer_client.post(reverse("console:dlq_make_readable", kwargs={"group": GROUP}))
    assert readable_denied.status_code == 403
    assert AuditRecord.objects.filter(action="dlq.make_readable", result="denied").count() == 1
