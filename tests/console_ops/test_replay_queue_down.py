"""A bulk replay when the task queue is down: Celery's broker URL names a Redis on a loopback port
where nothing listens, so queueing the job meets a real connection refusal. The console answers 503
saying so, keeps the job as failed with the reason, audits the refusal, and replays nothing."""

from __future__ import annotations

import kombu.pools
import pytest
from django.urls import reverse

from broker.local_cluster import free_port
from console.models import ReplayJob
from core.models import AuditRecord
from project.celery import app

pytestmark = pytest.mark.django_db

GROUP = "ops-queue-down"


def _drop_connection_pools() -> None:
    """Celery keeps its connection and producer pools once made, and kombu keeps them again in
    process-wide registries keyed by broker URL: drop both, so the next task is sent over a new
    connection to the URL configured now. (Closing only the app's pool left kombu's registry handing
    that closed pool back once the URL was restored: every later task failed "Acquire on closed
    pool".)"""
    app._pool = None
    app.amqp._producer_pool = None
    kombu.pools.reset()


@pytest.fixture
def task_queue_refuses():
    """Celery's broker URL at a closed loopback port (free_port: bound once, then released)."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    saved = app.conf.broker_url
    _drop_connection_pools()
    app.conf.broker_url = url
    yield url
    _drop_connection_pools()
    app.conf.broker_url = saved


def test_a_replay_that_cannot_be_queued_says_why_and_replays_nothing(
    namesrv, operator_client, task_queue_refuses
):
    response = operator_client.post(reverse("console:dlq_replay", kwargs={"group": GROUP}), {"scope": "all"})
    assert response.status_code == 503, response.content
    page = response.content.decode()
    assert "Replay not started" in page and "could not queue the job" in page
    assert "Connection refused" in page  # the transport's own words, from the real refusal
    assert "REDIS_URL" in page  # what to check
    job = ReplayJob.objects.get()
    assert job.status == ReplayJob.STATUS_FAILED and "Connection refused" in job.detail
    assert (job.sent, job.failed) == (0, 0)
    (record,) = AuditRecord.objects.filter(action="dlq.replay")
    assert record.result == "failed" and record.detail == job.detail
