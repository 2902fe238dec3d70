"""Issue 31, §5, what the attack on the webhook rules found (see test_webhook_addresses.py for the
rules themselves).

- A receiver answering its status line (or anything) a byte at a time held a delivery for ever: the
  timeout was per socket operation. Before: post() still inside after 25 s with timeout=2. After:
  the status line is all that is read, and the whole POST has one deadline.
- IPv6 addresses carrying an IPv4 one, tunnels and site-local passed the check (Python counts them
  public). Before: each URL below was saved (302). After: refused (400), naming the setting.
- A port out of range in the rule form (http://127.0.0.1:99999/). Before: HTTP 500. After: a form
  error (400).
- Old rows: errors saved before the fix held the receiver's body; migration 0003 reduces them.
"""

from __future__ import annotations

import importlib
import ipaddress
import socket
import threading
import time

import pytest
from django.apps import apps
from django.urls import reverse

from alerts import delivery, webhook_target
from alerts.models import AlertRule, Notification
from tests.alerts.test_alert_lifecycle import _queued_notification
from tests.alerts.test_alert_pages import RULE
from tests.alerts.test_webhook_addresses import LOOPBACK, operator, viewer  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db
DEADLINE_S = 1.0
GIVE_UP_WAITING_S = 20.0  # far past the deadline: a post() still running then never ends


class Trickling:
    """A loopback receiver that reads the request, writes ``first`` and then a byte every 0.1 s."""

    def __init__(self, first: bytes) -> None:
        self.first, self.stopped = first, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with self.listener:
            sock, _ = self.listener.accept()
        with sock:
            sock.recv(65536)
            # Hung up after GIVE_UP_WAITING_S at the latest, so that a test of the code before the
            # fix (which waited as long as bytes came) ends and fails rather than hangs.
            ends = time.monotonic() + GIVE_UP_WAITING_S
            try:
                sock.sendall(self.first)
                while not self.stopped.wait(0.1) and time.monotonic() < ends:
                    sock.sendall(b"X")
            except OSError:
                return  # the console hung up


@pytest.fixture
def trickling(settings):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    receivers: list[Trickling] = []

    def start(first: bytes) -> Trickling:
        receivers.append(Trickling(first))
        return receivers[-1]

    yield start
    for receiver in receivers:
        receiver.stopped.set()


def in_thread(work) -> tuple[threading.Thread, dict]:
    """Run ``work`` on a thread, waiting at most GIVE_UP_WAITING_S (before the fix it never ended)."""
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(result=work()), daemon=True)
    thread.start()
    thread.join(GIVE_UP_WAITING_S)
    return thread, outcome


def post_in_thread(url: str) -> tuple[threading.Thread, dict]:
    def post() -> str:
        try:
            webhook_target.post(url, b"{}", {}, DEADLINE_S)
        except webhook_target.WebhookFailed as exc:
            return f"failed: {exc}"
        return "delivered"

    return in_thread(post)


def test_a_status_then_a_trickled_body_is_delivered_without_waiting_for_the_body(trickling):
    thread, outcome = post_in_thread(trickling(b"HTTP/1.1 200 OK\r\n").url)
    assert not thread.is_alive() and outcome == {"result": "delivered"}


def test_a_trickled_status_line_fails_at_the_deadline(trickling):
    thread, outcome = post_in_thread(trickling(b"HTTP/1.1 200 ").url)
    assert not thread.is_alive() and outcome == {"result": "failed: timed out"}


def test_a_trickled_answer_is_a_failed_attempt_retried(trickling, settings, fake_clock):
    settings.ALERT_WEBHOOK_TIMEOUT_SECONDS = DEADLINE_S
    n = _queued_notification(fake_clock, trickling(b"HTTP/1.1 2").url)
    # On the test's thread: the row is in its database transaction.
    assert delivery.attempt(n.pk).status == Notification.QUEUED
    n.refresh_from_db()
    assert n.last_error == "timed out"


def test_the_delivery_task_has_celery_time_limits():
    from alerts.tasks import deliver_notification

    assert 0 < deliver_notification.soft_time_limit < deliver_notification.time_limit


CARRYING = [
    "http://[::7f00:1]/",  # IPv4-compatible 127.0.0.1
    "http://[64:ff9b::7f00:1]/",  # NAT64 127.0.0.1
    "http://[64:ff9b::a00:1]/",  # NAT64 10.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 169.254.169.254
    "http://[::ffff:0:7f00:1]/",  # SIIT 127.0.0.1
    "http://[64:ff9b:1::808:808]/",  # local-use NAT64 (whatever it carries)
    "http://[2002:7f00:1::1]/",  # 6to4 127.0.0.1
    "http://[2002:808:808::1]/",  # 6to4 (a tunnel, whatever it carries)
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    "http://[fec0::1]/",  # site-local
]


@pytest.mark.parametrize("url", CARRYING)
def test_ipv6_carrying_ipv4_tunnels_and_site_local_are_refused(operator, settings, url):  # noqa: F811
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = []
    response = operator.post(reverse("alerts:rule_create"), {**RULE, "webhook_url": url})
    assert response.status_code == 400
    assert "ALERT_WEBHOOK_ALLOWED_NETWORKS" in response.content.decode()
    assert not AlertRule.objects.filter(name=RULE["name"]).exists()


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "::ffff:8.8.8.8", "8.8.8.8", "2606:4700::1"])
def test_public_addresses_translated_or_not_are_allowed(settings, address):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = []
    assert webhook_target.refusal(ipaddress.ip_address(address)) is None


def test_the_allow_list_takes_the_carried_address(settings):
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    assert webhook_target.refusal(ipaddress.ip_address("64:ff9b::a00:1")) is None
    assert "10.0.0.1" in (webhook_target.refusal(ipaddress.ip_address("64:ff9b::a00:1")) or "10.0.0.1")


def test_a_port_out_of_range_is_a_form_error(operator, settings):  # noqa: F811
    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    url = "http://127.0.0.1:99999/"
    response = operator.post(reverse("alerts:rule_create"), {**RULE, "webhook_url": url})
    assert response.status_code == 400
    assert "not a usable http(s) URL" in response.content.decode()


OLD_ERRORS = {
    "RuntimeError: HTTP 500 from the receiver: SECRET redis_version:7": "HTTP 500",
    "gave up after 6 attempts; last: RuntimeError: HTTP 403 from the receiver: SECRET": (
        "gave up after 6 attempts; last: HTTP 403"
    ),
    "URLError: <urlopen error [Errno 111] Connection refused>": "connection refused",
    "URLError: <urlopen error [Errno -2] Name or service not known>": "name not resolved",
    "TimeoutError: timed out": "timed out",
    "RemoteDisconnected: Remote end closed connection without response": "no valid HTTP answer",
    "OSError: [Errno 113] No route to host": "connection failed",
    "refused: 127.0.0.1 is a loopback address: name it in ALERT_WEBHOOK_ALLOWED_NETWORKS": (
        "refused: 127.0.0.1 is a loopback address: name it in ALERT_WEBHOOK_ALLOWED_NETWORKS"
    ),
    "HTTP 502": "HTTP 502",
}


def test_old_rows_errors_are_reduced_to_a_status_or_class(fake_clock, viewer):  # noqa: F811
    migration = importlib.import_module("alerts.migrations.0003_webhook_errors_reduced")
    first = _queued_notification(fake_clock, "http://receiver.example/")
    rows = [first] + [
        Notification.objects.create(
            event=first.event,
            kind="firing",
            channel="webhook",
            target=f"http://receiver{number}.example/",
            created_at=fake_clock(),
        )
        for number in range(len(OLD_ERRORS) - 1)
    ]
    for row, error in zip(rows, OLD_ERRORS, strict=True):
        Notification.objects.filter(pk=row.pk).update(status="failed", last_error=error)
    mail = Notification.objects.create(
        event=first.event,
        kind="firing",
        channel="email",
        target="a@b.c",
        last_error="SMTP 550 no such user",
        created_at=fake_clock(),
    )
    migration.reduce_webhook_errors(apps, None)
    shown = [Notification.objects.get(pk=row.pk).last_error for row in rows]
    assert shown == list(OLD_ERRORS.values())
    assert Notification.objects.get(pk=mail.pk).last_error == "SMTP 550 no such user"
    page = viewer.get(reverse("alerts:event_detail", args=[first.event.pk])).content.decode()
    assert "SECRET" not in page and "Errno" not in page and "HTTP 500" in page
