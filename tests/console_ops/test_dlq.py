"""Dead-letter pages against a real cluster: list, make readable, filter, inspect, export, preview,
replay one (now) and all (Celery job), each audited."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from broker.local_cluster import wait_until
from console.models import ReplayJob
from core.models import AuditRecord
from tests.cluster import make_dead_letters

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "OpsOrders", "ops-billing"


@pytest.fixture(scope="module")
def dead_letters(cluster):
    make_dead_letters(cluster, TOPIC, GROUP, 3)
    return GROUP


def _list(client, **params):
    return client.get(reverse("console:dlq_list", kwargs={"group": GROUP}), params)


def _ids(response) -> list[str]:
    rows = response.context["rows"]
    return [r["offset_msg_id"] for r in rows]


@pytest.fixture
def readable(namesrv, dead_letters, operator_client):
    response = _list(operator_client)
    if "rows" not in (response.context or {}):
        operator_client.post(reverse("console:dlq_make_readable", kwargs={"group": GROUP}))
    return operator_client


def test_groups_page_lists_the_group_with_its_count(namesrv, dead_letters, viewer_client):
    response = viewer_client.get(reverse("console:dlq"))
    assert response.status_code == 200
    assert {"group": GROUP, "count": 3} in response.context["groups"]


def test_write_only_dlq_is_made_readable_by_an_operator(namesrv, operator_client, admin):
    # Dead letters of its own: the module's DLQ is made readable by whichever test needs it first.
    group = "ops-write-only"
    make_dead_letters(namesrv, "OpsWriteOnly", group, 1)
    assert all(q.perm == 2 for q in admin.topic_route(f"%DLQ%{group}").queue_datas)
    page = operator_client.get(reverse("console:dlq_list", kwargs={"group": group}))
    assert b"write-only" in page.content
    response = operator_client.post(reverse("console:dlq_make_readable", kwargs={"group": group}))
    assert response.status_code == 302
    assert all(q.perm == 6 for q in admin.topic_route(f"%DLQ%{group}").queue_datas)
    record = AuditRecord.objects.get(action="dlq.make_readable")
    assert record.result == "ok" and record.target == f"%DLQ%{group}"


def test_list_filter_and_inspect(readable):
    client = readable
    rows = _list(client).context["rows"]
    assert len(rows) == 3
    assert {r["origin"] for r in rows} == {TOPIC}
    assert _list(client, key="dead-1").context["rows"][0]["keys"] == "dead-1"
    assert len(_list(client, key="dead-1").context["rows"]) == 1
    assert _list(client, tag="nope").context["rows"] == []
    assert len(_list(client, begin="2000-01-01T00:00").context["rows"]) == 3
    assert _list(client, end="2000-01-01T00:00").context["rows"] == []
    assert _list(client, begin="yesterday").status_code == 400
    detail = client.get(
        reverse("console:dlq_message", kwargs={"group": GROUP, "offset_msg_id": rows[0]["offset_msg_id"]})
    )
    assert detail.status_code == 200
    assert detail.context["origin"] == TOPIC
    assert json.loads(detail.context["body"]["json"])["topic"] == TOPIC
    assert detail.context["body"]["hex"].startswith("00000000  7b 22")  # the message page's hex dump


def test_inspecting_a_message_of_another_topic_is_refused(readable, namesrv):
    from tests.cluster import send

    other = send(namesrv, "OpsElsewhere")[0]
    response = readable.get(
        reverse("console:dlq_message", kwargs={"group": GROUP, "offset_msg_id": other.offset_msg_id})
    )
    assert response.status_code == 400
    assert b"not in" in response.content
    garbage = readable.get(reverse("console:dlq_message", kwargs={"group": GROUP, "offset_msg_id": "xyz"}))
    assert garbage.status_code == 400 and b"not an offsetMsgId" in garbage.content


def test_export_csv_and_json(readable):
    url = reverse("console:dlq_export", kwargs={"group": GROUP, "fmt": "json"})
    rows = json.loads(readable.get(url).content)
    assert sorted(r["keys"] for r in rows) == ["dead-0", "dead-1", "dead-2"]
    csv_text = readable.get(reverse("console:dlq_export", kwargs={"group": GROUP, "fmt": "csv"})).content
    lines = csv_text.decode().strip().splitlines()
    # The Messages page's columns, with the dead letter's origin topic after its keys.
    columns = "msg_id,offset_msg_id,topic,broker_name,queue_id,queue_offset,tags,keys,origin_topic,"
    assert lines[0].startswith(columns)
    assert len(lines) == 4
    assert {r["origin_topic"] for r in rows} == {TOPIC}


def test_preview_is_a_dry_run(readable, admin):
    before = sum(q.max_offset for q in admin.topic_status(TOPIC).queues)
    ids = _ids(_list(readable))
    response = readable.post(
        reverse("console:dlq_preview", kwargs={"group": GROUP}), {"ids": ids[:2], "target": "original"}
    )
    assert response.status_code == 200
    assert [s.destination for s in response.context["steps"]] == [TOPIC, TOPIC]
    retry = readable.post(
        reverse("console:dlq_preview", kwargs={"group": GROUP}), {"scope": "all", "target": "retry"}
    )
    assert {s.destination for s in retry.context["steps"]} == {f"%RETRY%{GROUP}"}
    assert sum(q.max_offset for q in admin.topic_status(TOPIC).queues) == before
    assert not AuditRecord.objects.filter(action__startswith="dlq.replay").exists()


def test_replay_one_sends_a_copy_to_the_original_topic(readable, admin):
    rows = _list(readable, key="dead-2").context["rows"]
    response = readable.post(
        reverse("console:dlq_replay", kwargs={"group": GROUP}),
        {"scope": "one", "ids": rows[0]["offset_msg_id"], "target": "original"},
    )
    assert response.status_code == 200
    new_id = response.context["outcome"].new_msg_id
    copies = wait_until(lambda: admin.query_message_by_unique_key(TOPIC, new_id), what="the replayed copy")
    assert copies[0].keys == ["dead-2"]
    assert copies[0].get_property("ORIGIN_MESSAGE_ID") == rows[0]["msg_id"]
    record = AuditRecord.objects.get(action="dlq.replay")
    assert record.result == "ok" and record.parameters["newMsgId"] == new_id


def test_replay_all_runs_as_a_job_with_progress(readable, admin, eager_celery):
    response = readable.post(
        reverse("console:dlq_replay", kwargs={"group": GROUP}),
        {"scope": "all", "target": "retry", "rate": "50"},
    )
    assert response.status_code == 302
    job = ReplayJob.objects.get()
    assert (job.status, job.total, job.sent, job.failed) == ("done", 3, 3, 0)
    page = readable.get(reverse("console:replay_job", kwargs={"job_id": job.pk}))
    assert b"3</span> sent" in page.content
    listing = readable.get(reverse("console:replay_jobs"))
    assert list(listing.context["jobs"]) == [job]
    assert readable.get(reverse("console:replay_job", kwargs={"job_id": job.pk + 1})).status_code == 404
    polled = readable.get(
        reverse("console:replay_job", kwargs={"job_id": job.pk}), headers={"HX-Request": "true"}
    )
    assert b"<h1>" not in polled.content and b'data-status="done"' in polled.content
    actions = set(AuditRecord.objects.values_list("action", "result"))
    assert {("dlq.replay", "ok"), ("dlq.replay.finished", "ok")} <= actions
    assert sum(q.max_offset for q in admin.topic_status(f"%RETRY%{GROUP}").queues) >= 3


def test_replay_with_bad_input_is_refused(readable):
    url = reverse("console:dlq_replay", kwargs={"group": GROUP})
    assert readable.post(url, {"scope": "selected", "target": "original"}).status_code == 400
    assert readable.post(url, {"scope": "one", "ids": "zz", "target": "sideways"}).status_code == 400
    assert readable.post(url, {"scope": "all", "target": "original", "rate": "-3"}).status_code == 400
    assert not ReplayJob.objects.exists()
    failed = AuditRecord.objects.filter(action="dlq.replay").order_by("id")
    assert [r.result for r in failed] == ["failed"] * 3
    assert failed[1].parameters["target"] == ["sideways"] and "replay target" in failed[1].detail


def test_a_bad_selected_id_fails_alone_in_the_job(readable, eager_celery, namesrv):
    from tests.cluster import send

    good = _ids(_list(readable))[0]
    stranger = send(namesrv, "OpsElsewhere")[0].offset_msg_id
    readable.post(
        reverse("console:dlq_replay", kwargs={"group": GROUP}),
        {"scope": "selected", "ids": [good, stranger], "target": "retry"},
    )
    job = ReplayJob.objects.get()
    assert (job.status, job.total, job.sent, job.failed) == ("done", 2, 1, 1)
    assert job.errors[0]["msgId"] == stranger and "not in" in job.errors[0]["error"]
    assert AuditRecord.objects.get(action="dlq.replay.finished").result == "failed"


def test_list_is_paged(readable, monkeypatch):
    from console.views import dlq as dlq_views

    monkeypatch.setattr(dlq_views, "PAGE_SIZE", 2)
    first = _list(readable)
    assert len(first.context["rows"]) == 2 and first.context["total"] == 3
    second = _list(readable, page=2)
    assert len(second.context["rows"]) == 1
    assert {r["offset_msg_id"] for r in first.context["rows"]}.isdisjoint(_ids(second))
    partial = readable.get(
        reverse("console:dlq_list", kwargs={"group": GROUP}), {"page": 2},
        headers={"HX-Request": "true", "HX-Target": "dlq-table"},
    )  # fmt: skip
    assert b"<h1>" not in partial.content and b"page 2 of 2" in partial.content
