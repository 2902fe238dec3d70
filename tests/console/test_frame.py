"""Layout, login, roles, the name-server switch and cluster error pages."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from core.models import AuditRecord
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_anonymous_user_is_sent_to_login():
    response = Client().get("/cluster/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/cluster/")


def test_login_page_and_login_with_password(live_cluster, django_user_model):
    django_user_model.objects.create_user("lena", password=PASSWORD)
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b"Log in" in page.content
    bad = client.post("/accounts/login/", {"username": "lena", "password": "wrong"})
    assert b"Wrong user name or password" in bad.content
    good = client.post("/accounts/login/", {"username": "lena", "password": PASSWORD})
    assert good.status_code == 302


def test_layout_shows_nav_namesrv_user_and_role(viewer_client, live_cluster):
    page = viewer_client.get("/cluster/")
    html = page.content.decode()
    assert page.status_code == 200
    for label in ("Cluster", "Topics", "Consumers", "Producers", "Messages", "Audit"):
        assert f">{label}</a>" in html
    assert live_cluster.namesrv_addr in html
    assert "vera" in html and "viewer" in html
    assert "vendor/htmx.js" in html and "console/console.css" in html


def test_user_without_role_gets_403_with_reason(db, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("nobody", password=PASSWORD))
    response = client.get("/cluster/")
    assert response.status_code == 403
    assert b"needs the viewer role" in response.content


def test_logout_is_post(viewer_client):
    response = viewer_client.post("/accounts/logout/")
    assert response.status_code == 302
    assert viewer_client.get("/cluster/").status_code == 302


def test_namesrv_switch_only_to_configured_entries(viewer_client, settings, live_cluster):
    other = "127.0.0.1:1"
    settings.BROKER_NAMESRV = f"{live_cluster.namesrv_addr},{other}"
    page = viewer_client.get("/cluster/")
    assert other.encode() in page.content  # offered in the switch
    refused = viewer_client.post("/namesrv", {"namesrv": "10.0.0.1:9876", "next": "/cluster/"})
    assert refused.status_code == 400
    switched = viewer_client.post("/namesrv", {"namesrv": other, "next": "/topics/"})
    assert switched.status_code == 302 and switched["Location"] == "/topics/"
    assert AuditRecord.objects.filter(action="namesrv.switch", target=other, result="ok").exists()
    # Nothing listens there: the page explains it and how to start a name server, never a 500.
    down = viewer_client.get("/cluster/")
    assert down.status_code == 503
    assert b"cannot reach name server 127.0.0.1:1" in down.content
    assert b"python -m broker.namesrv" in down.content


def test_ensure_admin_creates_admin_once_with_generated_password(db, capsys, monkeypatch, django_user_model):
    monkeypatch.delenv("CONSOLE_ADMIN_PASSWORD", raising=False)
    call_command("ensure_admin")
    out = capsys.readouterr().out
    password = out.split("Password: ")[1].split()[0]
    user = django_user_model.objects.get(username="admin")
    assert user.check_password(password) and user.is_superuser
    assert len(password) >= 12
    call_command("ensure_admin")
    assert "exist already" in capsys.readouterr().out
    assert django_user_model.objects.count() == 1


def test_ensure_admin_takes_password_from_env(db, monkeypatch, capsys, django_user_model):
    monkeypatch.setenv("CONSOLE_ADMIN_PASSWORD", "from-the-environment-7")
    call_command("ensure_admin")
    assert "from-the-environment-7" not in capsys.readouterr().out
    assert django_user_model.objects.get(username="admin").check_password("from-the-environment-7")


def test_audit_page_filters_by_user_action_and_result(viewer_client, operator_client, db):
    operator_client.post("/topics/save", {"topic": "bad name!"})  # otto: failed (invalid input)
    viewer_client.post("/topics/TBW102/delete")  # vera: denied
    page = viewer_client.get("/audit/").content.decode()
    assert "otto" in page and "vera" in page and "topic.save" in page
    only_otto = viewer_client.get("/audit/", {"user": "ott"}).content.decode()
    assert "otto" in only_otto and ">vera<" not in only_otto
    denied = viewer_client.get("/audit/", {"result": "denied"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in denied and "<code>topic.delete</code>" in denied
    assert "<code>topic.save</code>" not in denied
    by_action = viewer_client.get("/audit/", {"action": "topic.save"}).content.decode()
    assert "invalid input" in by_action and "<code>topic.delete</code>" not in by_action
    empty = viewer_client.get("/audit/", {"user": "nobody-at-all"}).content.decode()
    assert "No audit record matches" in empty
