"""Every mutating operations endpoint: POST only, operator role, CSRF; viewers get 403."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from console.models import ReplayJob, SavedTailFilter
from core.models import AuditRecord

pytestmark = pytest.mark.django_db

MUTATING = [
    ("console:dlq_replay", {"group": "g1"}, {"scope": "one", "ids": "0A", "target": "original"}),
    ("console:dlq_make_readable", {"group": "g1"}, {}),
    ("console:end_transaction", {}, {"offset_msg_id": "0A", "action": "commit"}),
    ("console:save_tail_filter", {}, {"name": "mine", "topic": "T", "tags": "a"}),
    ("console:delete_tail_filter", {"filter_id": 1}, {}),
]


@pytest.mark.parametrize(("name", "kwargs", "data"), MUTATING)
def test_viewer_gets_403_and_nothing_changes(viewer_client, name, kwargs, data):
    response = viewer_client.post(reverse(name, kwargs=kwargs), data)
    assert response.status_code == 403
    assert b"operator role" in response.content
    # The refusal itself is audited (core.roles); nothing else happened.
    assert list(AuditRecord.objects.values_list("result", flat=True)) == ["denied"]
    assert not ReplayJob.objects.exists()
    assert not SavedTailFilter.objects.exists()


@pytest.mark.parametrize(("name", "kwargs", "data"), MUTATING)
def test_anonymous_is_sent_to_login(client, name, kwargs, data):
    response = client.post(reverse(name, kwargs=kwargs), data)
    assert response.status_code == 302
    assert "login" in response["Location"]


@pytest.mark.parametrize(("name", "kwargs", "data"), MUTATING)
def test_get_is_not_allowed_on_mutating_endpoints(operator_client, name, kwargs, data):
    assert operator_client.get(reverse(name, kwargs=kwargs)).status_code == 405


@pytest.mark.parametrize(("name", "kwargs", "data"), MUTATING)
def test_post_without_csrf_token_is_refused(operator, name, kwargs, data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(reverse(name, kwargs=kwargs), data)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert not AuditRecord.objects.exists()


def test_operator_saves_and_deletes_a_tail_filter_with_audit(operator_client, operator):
    response = operator_client.post(
        reverse("console:save_tail_filter"), {"name": "errors", "topic": "Orders", "tags": "err || fatal"}
    )
    assert response.status_code == 302
    saved = SavedTailFilter.objects.get(user=operator, name="errors")
    assert (saved.topic, saved.tags) == ("Orders", "err || fatal")
    page = operator_client.get(reverse("console:tail"))
    assert b"errors" in page.content
    operator_client.post(reverse("console:delete_tail_filter", kwargs={"filter_id": saved.pk}))
    assert not SavedTailFilter.objects.exists()
    actions = list(AuditRecord.objects.order_by("id").values_list("action", "result"))
    assert actions == [("tail.filter.save", "ok"), ("tail.filter.delete", "ok")]


def test_saving_a_bad_filter_is_refused_with_the_reason(operator_client):
    response = operator_client.post(reverse("console:save_tail_filter"), {"name": "bad", "sql": "a >"})
    assert response.status_code == 400
    assert b"SQL92" in response.content
    assert not SavedTailFilter.objects.exists()
    assert AuditRecord.objects.get().result == "failed"


def test_deleting_another_users_filter_does_nothing(operator_client, django_user_model):
    other = django_user_model.objects.create_user("someone-else", password="x-not-used-77")
    theirs = SavedTailFilter.objects.create(user=other, name="theirs", topic="T")
    operator_client.post(reverse("console:delete_tail_filter", kwargs={"filter_id": theirs.pk}))
    assert SavedTailFilter.objects.filter(pk=theirs.pk).exists()
    assert AuditRecord.objects.get().result == "failed"


def test_tail_page_refuses_a_bad_topic_name(viewer_client):
    response = viewer_client.get(reverse("console:tail"), {"topic": "bad topic!"})
    assert response.status_code == 400
    assert b"contains characters" in response.content
