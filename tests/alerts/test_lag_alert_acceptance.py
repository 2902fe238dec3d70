"""Acceptance 2 of issue 23, end to end: a real name server and broker, a consumer group whose
consumer is stopped while messages keep coming, the history sampler's real cycles under a fake clock,
the alert evaluation they trigger, and a real Celery worker delivering to a webhook receiver on
loopback. The lag rule goes pending, fires after its minutes, the receiver gets exactly one
notification (after a 500 it was retried), the event resolves once the consumer has caught up and
a second notification says so; an operator acknowledges it; a receiver that always fails is given
up after the bound. About 40 s (cluster, worker, two consumers)."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from alerts.models import AlertEvent, AlertRule, Notification
from broker.local_cluster import wait_until
from core import cluster_access
from core.models import AuditRecord
from history import sampler
from tests.alerts.conftest import WebhookReceiver
from tests.analytics.test_console_celery import REPO, SOLO_WORKER, CeleryProcess, database_url
from tests.cluster import ONE_BROKER, send, start

TOPIC, GROUP = "AlertOrders", "alert-orders"
MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    cluster = start(ONE_BROKER, tmp_path_factory.mktemp("alerts-cluster"))
    try:
        cluster.create_topic(TOPIC, 2)
        yield cluster
    finally:
        cluster_access.close_all()
        cluster.stop()


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real Celery worker on the test database; short backoff so a retry comes within a second."""
    import os

    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=database_url(connection.settings_dict),
        # The var dir this process's settings were made with (its Celery queue folder), not the
        # environment's: another conftest may have set Django up before tests/alerts set its own.
        CONSOLE_VAR_DIR=str(settings.VAR_DIR),
        ALERT_WEBHOOK_BACKOFF_SECONDS="0.5",
        ALERT_WEBHOOK_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        ALERT_WEBHOOK_TIMEOUT_SECONDS="5",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
    )
    log = tmp_path_factory.mktemp("alerts-worker") / "worker.log"
    process = CeleryProcess(SOLO_WORKER, env, log, "ready.")
    yield process
    process.stop()


class Counting:
    """A push consumer's listener counting what it consumed."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, msgs, ctx):
        from broker.client import ConsumeConcurrentlyStatus

        with self._lock:
            self.count += len(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def test_stopped_consumer_pends_fires_notifies_once_and_resolves(
    live, worker, transactional_db, fake_clock, settings
):
    settings.BROKER_NAMESRV = cluster = live.namesrv_addr
    settings.ALERT_WEBHOOK_URLS, settings.ALERT_EMAIL_TO = [], []
    receiver, broken = WebhookReceiver(), WebhookReceiver()
    receiver.statuses = [500]  # the first delivery fails: the worker retries it
    broken.statuses = [500] * 10
    try:
        AlertRule.objects.all().delete()
        rule = AlertRule.objects.create(name="Orders lag", kind="group_lag", threshold=5, for_minutes=3,
                                        group_pattern="alert-*", webhook_url=receiver.url)  # fmt: skip
        AlertRule.objects.create(name="Orders lag (broken receiver)", kind="group_lag", threshold=5,
                                 for_minutes=3, group_pattern=GROUP, webhook_url=broken.url)  # fmt: skip
        admin = cluster_access.admin_for(cluster)

        def cycle(minutes: float) -> None:
            fake_clock.advance(minutes=minutes)
            sampler.sample(cluster, admin)  # stores the cycle; sample_stored runs the evaluation

        def event() -> AlertEvent:
            latest = AlertEvent.objects.filter(rule=rule).order_by("-id").first()
            assert latest is not None, "the rule has no event yet"
            return latest

        # The group consumes what is sent, then its consumer stops; messages keep coming.
        send(cluster, TOPIC, 6, keys="before")
        consumed = Counting()
        consumer = live.push_consumer(GROUP, TOPIC, consumed, "alerts-consumer")
        wait_until(lambda: consumed.count >= 6, 60, 0.2, "the consumer to take the first messages")
        consumer.shutdown()
        send(cluster, TOPIC, 12, keys="while-stopped")

        cycle(0)
        assert (event().state, event().value) == ("pending", 12)
        send(cluster, TOPIC, 3, keys="still-coming")
        cycle(2)
        assert (event().state, event().value) == ("pending", 15)
        assert receiver.attempts == 0
        cycle(1)  # three minutes of lag: firing
        assert event().state == "firing" and event().firing_at == fake_clock()
        wait_until(lambda: receiver.received, 60, 0.2, "the firing notification")
        assert receiver.attempts == 2  # a 500, then delivered by the worker's retry
        assert receiver.received[0]["status"] == "firing"
        assert receiver.received[0]["alerts"][0]["labels"]["group"] == GROUP
        cycle(0.5)  # still firing: nothing new

        # An operator acknowledges it; the badge no longer counts it.
        operator = User.objects.create_user("oskar", password="not-used-here")
        operator.groups.add(Group.objects.get_or_create(name="operator")[0])
        client = Client()
        client.force_login(operator)
        assert 'data-alerts-firing="2"' in client.get(reverse("alerts:events")).content.decode()
        ack = client.post(
            reverse("alerts:event_acknowledge", args=[event().pk]), {"note": "restarting consumer"}
        )
        assert ack.status_code == 302
        assert AuditRecord.objects.filter(action="alerts.event.acknowledge", result="ok").exists()
        assert 'data-alerts-firing="1"' in client.get(reverse("alerts:events")).content.decode()

        # The consumer comes back and catches up: the next cycle resolves the event.
        consumer = live.push_consumer(GROUP, TOPIC, consumed, "alerts-consumer-2")
        try:
            wait_until(lambda: consumed.count >= 6 + 15, 60, 0.2, "the consumer to catch up")
            wait_until(lambda: _lag(admin, GROUP) == 0, 30, 0.2, "the committed offsets to reach the end")
        finally:
            consumer.shutdown()
        cycle(0.5)
        resolved = event()
        assert resolved.state == "resolved" and resolved.acknowledged_by == "oskar"
        wait_until(lambda: len(receiver.received) >= 2, 60, 0.2, "the resolved notification")
        cycle(0.5)
        assert [m["status"] for m in receiver.received] == ["firing", "resolved"]
        assert receiver.received[1]["event"]["id"] == resolved.pk

        # The other rule's receiver always fails: each of its two notifications (firing, resolved) is
        # given up after the bound, and the row says so.
        def given_up() -> list[Notification]:
            rows = list(Notification.objects.filter(target=broken.url, status="failed").order_by("id"))
            return rows if len(rows) == 2 else []

        rows = wait_until(given_up, 60, 0.2, "the failing receiver to be given up")
        assert [(n.kind, n.attempts) for n in rows] == [("firing", MAX_ATTEMPTS), ("resolved", MAX_ATTEMPTS)]
        assert broken.attempts == 2 * MAX_ATTEMPTS and broken.received == []
        assert "gave up after 3 attempts" in rows[0].last_error and "HTTP 500" in rows[0].last_error
    finally:
        receiver.stop()
        broken.stop()


def _lag(admin, group: str) -> int:
    from core.cluster_snapshot import collect

    snapshot = admin.run(collect(admin.core))
    return sum(g.lag for g in snapshot.groups if g.name == group)
