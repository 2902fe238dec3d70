"""Saved live-tail filters: saving one applies it (the redirect without JavaScript carries it, the
htmx answer is the new list and leaves the page alone); deleting keeps the tailed topic."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from console.models import SavedTailFilter

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
