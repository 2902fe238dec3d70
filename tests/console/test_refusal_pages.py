"""Refusals that happen before any command runs still answer in the console's words: an unknown
page names the path only (never the URL patterns), a failed CSRF check and a method a URL does not
take are the console's page (a fragment for htmx) with the reason, and none leaves an audit record."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from core.models import AuditRecord

pytestmark = pytest.mark.django_db

FILTER = {"name": "errors", "topic": "Orders", "tags": "err", "sql": "", "key": ""}


def _title(response) -> str:
    found = re.search(rb"<title>(.*?)</title>", response.content, re.S)
    assert found is not None, response.content[:400]
    return found.group(1).decode()


def test_an_unknown_page_names_the_path_and_not_the_url_patterns():
    response = Client().get("/nope")
    assert response.status_code == 404
    html = response.content.decode()
    assert "There is no page at /nope." in html
    assert "tried" not in html and "ops/tail" not in html and "URLPattern" not in html


def test_a_post_without_its_csrf_token_is_refused_with_the_reason(csrf_operator_client):
    response = csrf_operator_client.post("/ops/tail/filters/", FILTER)
    assert response.status_code == 403
    assert _title(response).startswith("Not allowed")
    html = response.content.decode()
    assert "CSRF" in html and "reload the page" in html
    fragment = csrf_operator_client.post("/ops/tail/filters/", FILTER, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 403
    assert "<html" not in fragment.content.decode() and "CSRF" in fragment.content.decode()
    assert not AuditRecord.objects.exists()


def test_a_method_the_url_does_not_take_is_refused_with_the_reason(operator_client):
    response = operator_client.get("/ops/tail/filters/")
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert _title(response).startswith("Method not allowed")
    assert "/ops/tail/filters/ takes POST only, not GET" in response.content.decode()
    fragment = operator_client.get("/ops/tail/filters/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 405 and "<html" not in fragment.content.decode()
    assert "takes POST only" in fragment.content.decode()
    assert not AuditRecord.objects.exists()
