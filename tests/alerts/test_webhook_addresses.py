"""Issue 31, §5: alert webhooks are not a way into the console's own network (SSRF).

A webhook to a loopback, private, link-local or metadata address is refused when the rule is saved
(a form error, HTTP 400) and again when it would be sent, unless ALERT_WEBHOOK_ALLOWED_NETWORKS
names the address; every address a name resolves to is checked, and the POST goes to the address
checked (no second lookup a rebinding DNS could answer differently); no redirect is followed; the
event page shows an HTTP status or a short error class, never the receiver's body or the raw
connect error. The alert tests' conftest allows 127.0.0.1 for their loopback receivers: these
tests take the setting away.

Before: a rule with http://127.0.0.1:6379/ was saved (302); the worker POSTed to the loopback
receiver (1 request, delivered); a 500's body ("SECRET-BODY…") and "[Errno 111] Connection
refused" were on the event page.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from alerts import delivery
from alerts.models import AlertRule, Notification
from tests.alerts.test_alert_lifecycle import _queued_notification
from tests.alerts.test_alert_pages import PASSWORD, RULE
from tests.cluster import logged_in_client

pytestmark = pytest.mark.django_db
viewer = logged_in_client("vic", "viewer", PASSWORD)
operator = logged_in_client("ora", "operator", PASSWORD)
LOOPBACK = [ipaddress.ip_network("127.0.0.1/32")]
SECRET = b"SECRET-BODY redis_version:7.0.15"


@pytest.fixture
def nothing_allowed(settings):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = []


class Answering:
    """A loopback HTTP server giving every POST ``status``, ``SECRET`` as body, and ``headers``."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.requests: list[dict] = []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                served.requests.append({"path": self.path, "host": self.headers.get("Host")})
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(SECRET)))
                self.end_headers()
                self.wfile.write(SECRET)

            do_POST = do_GET = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def answering():
    servers: list[Answering] = []

    def start(status: int, headers: dict[str, str] | None = None) -> Answering:
        servers.append(Answering(status, headers))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://localhost:8000/x",
        "http://[::1]:9000/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0:6379/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
def test_a_rule_with_an_internal_webhook_is_refused_at_save(operator, nothing_allowed, url):
    response = operator.post(reverse("alerts:rule_create"), {**RULE, "webhook_url": url})
    assert response.status_code == 400
    assert "ALERT_WEBHOOK_ALLOWED_NETWORKS" in response.content.decode()
    assert not AlertRule.objects.filter(name=RULE["name"]).exists()


def test_the_allow_list_lets_an_internal_webhook_be_saved(operator, settings):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    response = operator.post(reverse("alerts:rule_create"), {**RULE, "webhook_url": "http://127.0.0.1:9/x"})
    assert response.status_code == 302
    assert AlertRule.objects.get(name=RULE["name"]).webhook_url == "http://127.0.0.1:9/x"


def test_a_stored_internal_webhook_is_not_posted_and_not_retried(nothing_allowed, fake_clock, answering):
    receiver = answering(200)
    n = _queued_notification(fake_clock, receiver.url)  # saved before the rule, or by hand
    assert delivery.attempt(n.pk) == delivery.Outcome(Notification.FAILED)
    n.refresh_from_db()
    assert receiver.requests == []
    assert n.status == "failed" and n.attempts == 1
    assert "127.0.0.1 is a loopback address" in n.last_error


def test_every_resolved_address_is_checked(nothing_allowed, fake_clock, monkeypatch, answering):
    receiver = answering(200)
    answers = {"rebind.example": ["93.184.216.34", "127.0.0.1"]}
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo(answers))
    n = _queued_notification(fake_clock, f"http://rebind.example:{receiver.port}/")
    assert delivery.attempt(n.pk).status == Notification.FAILED
    n.refresh_from_db()
    assert receiver.requests == [] and "127.0.0.1 is a loopback address" in n.last_error


def test_the_post_goes_to_the_address_checked(settings, fake_clock, monkeypatch, answering):
    # A name the system cannot resolve: delivered only if the checked address is the one used.
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    receiver = answering(200)
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo({"pinned.example": ["127.0.0.1"]}))
    n = _queued_notification(fake_clock, f"http://pinned.example:{receiver.port}/hook?x=1")
    assert delivery.attempt(n.pk) == delivery.Outcome(Notification.DELIVERED)
    assert receiver.requests == [{"path": "/hook?x=1", "host": f"pinned.example:{receiver.port}"}]


def test_no_redirect_is_followed(settings, fake_clock, answering):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    target = answering(200)
    redirecting = answering(307, {"Location": target.url})
    n = _queued_notification(fake_clock, redirecting.url)
    assert delivery.attempt(n.pk).status == Notification.QUEUED
    n.refresh_from_db()
    assert len(redirecting.requests) == 1 and target.requests == [] and n.last_error == "HTTP 307"


def test_the_event_page_shows_a_status_not_the_answer(settings, fake_clock, answering, viewer):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    failing = answering(500)
    n = _queued_notification(fake_clock, failing.url)
    delivery.attempt(n.pk)
    with socket.socket() as unused:  # a port nobody listens on: connection refused
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    refused = _queued_notification(fake_clock, f"http://127.0.0.1:{closed_port}/")
    refused.event = n.event
    refused.save()
    delivery.attempt(refused.pk)
    page = viewer.get(reverse("alerts:event_detail", args=[n.event.pk])).content.decode()
    assert "HTTP 500" in page and "connection refused" in page
    assert "SECRET" not in page and "Errno" not in page and "redis_version" not in page


def fake_getaddrinfo(answers: dict[str, list[str]]):
    real = socket.getaddrinfo

    def lookup(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port or 80))
            for address in answers[host]
        ]

    return lookup
