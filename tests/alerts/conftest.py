"""Alert tests: Django on a throw-away var dir (its SQLite test database is a file, so the Celery
worker the acceptance test starts shares it), a fake clock, a webhook receiver on loopback."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
_OWN_VAR_DIR = None if "CONSOLE_VAR_DIR" in os.environ else tempfile.mkdtemp(prefix="alerts-var-")
if _OWN_VAR_DIR:
    os.environ["CONSOLE_VAR_DIR"] = _OWN_VAR_DIR
    atexit.register(shutil.rmtree, _OWN_VAR_DIR, ignore_errors=True)
# The receivers below listen on loopback, where webhooks may go only when allowed (the Celery
# worker the acceptance test starts reads this from its environment).
LOOPBACK_ALLOWED = "127.0.0.1/32"
os.environ.setdefault("ALERT_WEBHOOK_ALLOWED_NETWORKS", LOOPBACK_ALLOWED)

import django  # noqa: E402
import django.apps  # noqa: E402

if not django.apps.apps.ready:
    django.setup()

import json  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

import pytest  # noqa: E402

CLUSTER = "127.0.0.1:9876"


from tests.history_clock import FakeClock, fake_clock  # noqa: E402, F401  (a fixture)


class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 (port chosen by the OS) recording each POST's JSON body;
    ``statuses`` are the answers to give, in order (then 200 for ever)."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.attempts = 0
        self.statuses: list[int] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length", "0")), 1 << 20)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.attempts += 1
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    if status < 300:
                        receiver.received.append(json.loads(body))
                        receiver.headers.append(dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def loopback_webhooks_allowed(settings):
    """In this process too, whichever test set Django up first."""
    import ipaddress

    settings.ALERT_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network(LOOPBACK_ALLOWED)]


@pytest.fixture
def webhook():
    receiver = WebhookReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def eager(settings):
    """Notifications delivered by the Celery task run in-process (the acceptance test runs a worker)."""
    from project.celery import app as celery_app

    settings.ALERT_WEBHOOK_URLS, settings.ALERT_EMAIL_TO = [], []
    settings.ALERT_WEBHOOK_BACKOFF_SECONDS = 0.01
    settings.ALERT_WEBHOOK_TIMEOUT_SECONDS = 5
    before = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = before
