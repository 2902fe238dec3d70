"""Saved live-tail filters: saving one applies it (the redirect without JavaScript carries it, the
htmx answer is the new list and leaves the page alone); deleting keeps the tailed topic."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.db.models import CharField

from broker.common.names import TOPIC_MAX_LENGTH
from console.models import SavedTailFilter
from core.models import AuditRecord

pytestmark = pytest.mark.django_db

FILTER = {"name": "errors", "topic": "Orders", "tags": "err || fatal", "sql": "level > 3", "key": ""}


def test_saving_without_javascript_lands_on_the_tail_with_the_filter_applied(operator_client):
    response = operator_client.post("/ops/tail/filters/", FILTER)
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == "/ops/tail/"
    assert parse_qs(location.query) == {"topic": ["Orders"], "tags": ["err || fatal"], "sql": ["level > 3"]}
    page = operator_client.get(response["Location"]).content.decode()
    assert 'name="tags" placeholder="TagA || TagB" value="err || fatal"' in page
    assert 'value="level &gt; 3"' in page


def test_saving_from_the_page_answers_with_the_list_only(operator_client):
    response = operator_client.post("/ops/tail/filters/", FILTER, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "saved and applied" in html
    assert '<section id="saved-filters" hx-swap-oob="true">' in html and ">errors</a>" in html
    again = operator_client.post("/ops/tail/filters/", {**FILTER, "tags": "err"}, HTTP_HX_REQUEST="true")
    assert "updated and applied" in again.content.decode()
    assert SavedTailFilter.objects.get().tags == "err"


def test_deleting_keeps_the_tailed_topic(operator_client):
    operator_client.post("/ops/tail/filters/", FILTER)
    saved = SavedTailFilter.objects.get()
    response = operator_client.post(f"/ops/tail/filters/{saved.pk}/delete/", {"topic": "Orders"})
    assert response["Location"] == "/ops/tail/?topic=Orders"
    operator_client.post("/ops/tail/filters/", FILTER)
    saved = SavedTailFilter.objects.get()
    response = operator_client.post(
        f"/ops/tail/filters/{saved.pk}/delete/", {"topic": "Orders"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.startswith('<section id="saved-filters">') and "No saved filter yet" in html
    assert not SavedTailFilter.objects.exists()


def test_a_filter_saved_for_any_topic_links_to_the_topic_tailed_now(operator_client):
    operator_client.post("/ops/tail/filters/", {**FILTER, "topic": ""})
    page = operator_client.get("/ops/tail/", {"topic": "Payments"}).content.decode()
    assert 'href="/ops/tail/?topic=Payments&amp;tags=err+%7C%7C+fatal&amp;sql=level+%3E+3"' in page


def _refused(client, fields: dict, reason: str) -> None:
    """Refused with a 400 naming ``reason``: nothing saved, one failed record."""
    AuditRecord.objects.all().delete()
    response = client.post("/ops/tail/filters/", {**FILTER, **fields})
    assert response.status_code == 400, response.status_code
    assert reason in response.content.decode()
    assert not SavedTailFilter.objects.exists()
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result) == ("tail.filter.save", "failed") and reason in record.detail


def test_a_topic_that_is_no_topic_name_is_refused(operator_client):
    _refused(operator_client, {"topic": "<img src=x onerror=alert(1)>"}, "topic")
    _refused(operator_client, {"topic": "T" * 5000}, "topic")


def _column_length(name: str) -> int:
    column = SavedTailFilter._meta.get_field(name)
    assert isinstance(column, CharField) and column.max_length is not None
    return column.max_length


def test_values_longer_than_their_columns_are_refused_on_every_database(operator_client):
    """The lengths the command allows are the model's columns' (PostgreSQL refuses longer with a
    DataError; SQLite would store them): a value of the column's length is saved, one more refused."""
    for name in ("key", "tags", "name"):
        limit = _column_length(name)
        filler = "a" * (limit + 1)
        _refused(operator_client, {name: filler}, f"the {name} is longer than {limit} characters")
        response = operator_client.post("/ops/tail/filters/", {**FILTER, name: filler[:limit]})
        assert response.status_code == 302, (name, response.content[:300])
        assert SavedTailFilter.objects.filter(**{name: filler[:limit]}).exists()
        SavedTailFilter.objects.all().delete()
    assert _column_length("topic") >= TOPIC_MAX_LENGTH


def test_deleting_another_users_filter_is_not_found_with_the_reason(operator_client, admin_client_):
    admin_client_.post("/ops/tail/filters/", FILTER)
    theirs = SavedTailFilter.objects.get()
    AuditRecord.objects.all().delete()
    response = operator_client.post(f"/ops/tail/filters/{theirs.pk}/delete/", {"topic": "Orders"})
    assert response.status_code == 404
    assert f"You have no saved filter {theirs.pk}" in response.content.decode()
    assert SavedTailFilter.objects.filter(pk=theirs.pk).exists()
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.target) == ("tail.filter.delete", "failed", str(theirs.pk))
    assert record.detail == f"You have no saved filter {theirs.pk} (no such filter of yours)."
