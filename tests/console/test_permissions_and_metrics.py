"""Every mutating endpoint: anonymous users go to login, viewers get 403 (audited as denied), GET is
refused, CSRF is enforced. And /metrics in Prometheus text format, for the holder of its bearer token or a
console user only."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, get_resolver

from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER as CLUSTER
from tests.cluster import route_settles

pytestmark = pytest.mark.django_db

MSG_ID = "7F00000100002A9F0000000000000000"
SCRAPER_TOKEN = "s3cret-scraper-token-for-tests"
SCRAPER = {"Authorization": f"Bearer {SCRAPER_TOKEN}"}
# (path, form data, minimum role) — one entry per mutating view of the console.
MUTATING = [
    (
        "/topics/save",
        {"topic": "DeniedTopic", "cluster": CLUSTER, "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6},
        "operator",
    ),
    ("/topics/TBW102/delete", {}, "operator"),
    ("/topics/TBW102/send", {"body": "x"}, "operator"),
    (
        "/groups/save",
        {"group": "g", "cluster": CLUSTER, "retry_max_times": 1, "retry_queue_nums": 1},
        "operator",
    ),
    ("/groups/g/delete", {}, "operator"),
    ("/groups/g/reset/apply", {"topic": "TBW102", "mode": "latest"}, "operator"),
    ("/groups/g/skip-backlog", {}, "operator"),
    (f"/messages/{MSG_ID}/resend", {"group": "g", "client_id": "c"}, "operator"),
    ("/cluster/broker/127.0.0.1:1/config", {"key": "deleteWhen", "value": "04"}, "admin"),
    ("/cluster/broker/127.0.0.1:1/damaged/purge", {"from": "0", "confirm": "yes"}, "admin"),
    ("/cluster/switchover/broker-a/", {"broker_id": 1, "master_epoch": 1, "confirm": "yes"}, "admin"),
    ("/acl/accounts/save", {"access_key": "denied-key", "secret_key": "denied-secret-1"}, "admin"),
    ("/acl/accounts/delete", {"access_key": "denied-key"}, "admin"),
    ("/acl/white-list", {"addresses": "10.0.0.*"}, "admin"),
    ("/ops/dlq/g1/make-readable/", {}, "operator"),
    ("/ops/dlq/g1/replay/", {"scope": "one", "ids": "0A", "target": "original"}, "operator"),
    ("/ops/transactions/end/", {"offset_msg_id": "0A", "action": "commit"}, "operator"),
    ("/ops/tail/filters/", {"name": "mine", "topic": "T", "tags": "a"}, "operator"),
    ("/ops/tail/filters/1/delete/", {}, "operator"),
]


def _is_post_only(callback) -> bool:
    # require_POST keeps its allowed-method list in the closure of the outermost wrapper.
    return any(cell.cell_contents == ["POST"] for cell in callback.__closure__ or ())


def test_every_mutating_view_is_listed_here():
    """A new POST view of the console must be added to MUTATING (and so to these tests); the dry-run
    preview of a replay and the name-server switch are open to every viewer."""
    console_patterns = next(
        p for p in get_resolver().url_patterns if getattr(p, "namespace", "") == "console"
    )
    posting = {
        p.callback.__name__
        for p in console_patterns.url_patterns
        if isinstance(p, URLPattern) and _is_post_only(p.callback)
    }
    listed = {get_resolver().resolve(path).func.__name__ for path, _, _ in MUTATING}
    assert posting - {"namesrv_switch", "dlq_preview"} == listed
    assert len(listed) == len(MUTATING)


@pytest.mark.parametrize(("path", "data", "role"), MUTATING)
def test_anonymous_is_sent_to_login(path, data, role, live_cluster):
    response = Client().post(path, data)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize(("path", "data", "role"), MUTATING)
def test_viewer_gets_403_and_a_denied_audit_record(path, data, role, viewer_client):
    response = viewer_client.post(path, data)
    assert response.status_code == 403
    assert f"needs the {role} role".encode() in response.content
    record = AuditRecord.objects.get()
    assert record.result == "denied" and record.username == "vera" and record.target == path


@pytest.mark.parametrize(("path", "data", "role"), MUTATING)
def test_get_is_refused(path, data, role, admin_client_):
    assert admin_client_.get(path).status_code == 405


@pytest.mark.parametrize(("path", "data", "role"), [m for m in MUTATING if m[2] == "operator"])
def test_csrf_token_is_required(path, data, role, csrf_operator_client):
    response = csrf_operator_client.post(path, data)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert not AuditRecord.objects.exists()  # refused before the view ran


def test_with_a_csrf_token_the_post_goes_through(csrf_operator_client, admin):
    page = csrf_operator_client.get("/topics/")
    token = page.cookies["csrftoken"].value
    response = csrf_operator_client.post(
        "/topics/save",
        {
            "topic": "CsrfChecked",
            "cluster": CLUSTER,
            "read_queue_nums": 1,
            "write_queue_nums": 1,
            "perm": 6,
            "csrfmiddlewaretoken": token,
        },
    )
    assert response.status_code == 302
    assert route_settles(admin, "CsrfChecked", {("broker-a", 1, 6), ("broker-b", 1, 6)})


def test_metrics_exposes_broker_topic_and_group_figures(live_cluster, admin, settings):
    settings.CONSOLE_METRICS_CACHE_SECONDS = 0
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, "MetricsTopic", 1, 1)
    masters = admin.resolve_masters(None, CLUSTER)
    for addr in masters:  # the group starts at offset 0 everywhere: the one message sent is its lag
        admin.create_or_update_subscription_group(addr, "metrics-group")
        admin.update_consumer_offset(addr, "metrics-group", "MetricsTopic", 0, 0)
    from broker.cli_commands.sending import send_with_producer
    from broker.common.message import Message

    send_with_producer(admin, Message(topic="MetricsTopic", body=b"m"), None)
    settings.CONSOLE_METRICS_TOKEN = SCRAPER_TOKEN
    response = Client().get("/metrics", headers=SCRAPER)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    for name in ("broker-a", "broker-b"):
        assert (
            f'rocketmq_broker_up{{addr="{live_cluster.brokers[name].addr}",broker="{name}",broker_id="0",'
            f'cluster="{CLUSTER}"}} 1.0' in text
        )
    assert "# TYPE rocketmq_broker_put_tps gauge" in text
    disk = [float(v) for v in re.findall(r"^rocketmq_broker_commitlog_disk_ratio\{.*\} (\S+)$", text, re.M)]
    assert len(disk) == 2 and all(0 < ratio <= 1 for ratio in disk), disk
    waits = re.findall(r"^rocketmq_broker_request_wait_ms\{.*\} (\S+)$", text, re.M)
    assert len(waits) == 2 and all(float(wait) >= 0 for wait in waits), waits
    assert 'rocketmq_topic_messages_total{topic="MetricsTopic"} 1.0' in text
    assert 'rocketmq_group_lag{group="metrics-group"} 1.0' in text
    assert 'rocketmq_group_clients{group="metrics-group"} 0.0' in text
    assert "rocketmq_console_collect_errors 0.0" in text
    assert Client().get("/metrics", {"namesrv": "10.1.1.1:9876"}, headers=SCRAPER).status_code == 400


def test_metrics_when_the_name_server_is_down(settings, db):
    settings.BROKER_NAMESRV = "127.0.0.1:1"
    settings.CONSOLE_METRICS_CACHE_SECONDS = 0
    settings.CONSOLE_METRICS_TOKEN = SCRAPER_TOKEN
    text = Client().get("/metrics", headers=SCRAPER).content.decode()
    assert "rocketmq_console_collect_errors 1.0" in text


# -- who may read /metrics -------------------------------------------------------------------------
def _metrics_status(client, settings, token, headers=None):
    settings.BROKER_NAMESRV = "127.0.0.1:1"  # refusals come first; an allowed scrape finds no cluster
    settings.CONSOLE_METRICS_TOKEN = token
    return client.get("/metrics", headers=headers or {})


@pytest.mark.parametrize("token", ["", SCRAPER_TOKEN])
def test_metrics_refuses_an_anonymous_scrape_with_401(settings, db, token):
    response = _metrics_status(Client(), settings, token)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="pyrocket console metrics"'
    assert b"rocketmq_" not in response.content
    expected = b"Authorization: Bearer" if token else b"set CONSOLE_METRICS_TOKEN"
    assert expected in response.content


@pytest.mark.parametrize(
    "authorization",
    [
        f"Bearer {SCRAPER_TOKEN}x",
        f"Bearer {SCRAPER_TOKEN[:-1]}",
        "Bearer",
        f"Basic {SCRAPER_TOKEN}",
        "Bearer \u00e9",
    ],
)
def test_metrics_refuses_a_wrong_token(settings, db, authorization):
    response = _metrics_status(Client(), settings, SCRAPER_TOKEN, {"Authorization": authorization})
    assert response.status_code == 401 and b"rocketmq_" not in response.content


def test_a_token_is_refused_when_none_is_configured(settings, db):
    """Unset means login only: no token, not even an empty one, lets a scraper in."""
    for authorization in ("Bearer ", "Bearer x"):
        response = _metrics_status(Client(), settings, "", {"Authorization": authorization})
        assert response.status_code == 401


def test_metrics_with_the_token_or_a_console_login(settings, viewer_client, db):
    assert _metrics_status(Client(), settings, SCRAPER_TOKEN, SCRAPER).status_code == 200
    for token in ("", SCRAPER_TOKEN):  # a console user needs no token, whether one is configured or not
        response = _metrics_status(viewer_client, settings, token)
        assert response.status_code == 200
        assert "rocketmq_console_collect_errors 1.0" in response.content.decode()


def test_metrics_refuses_a_user_without_a_role(settings, db):
    from tests.cluster import create_user

    client = Client()
    client.force_login(create_user("nobody-metrics", None, "not used here 1"))
    response = _metrics_status(client, settings, "")
    assert response.status_code == 403 and b"no console role yet" in response.content
