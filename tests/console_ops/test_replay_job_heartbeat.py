"""The abandoned rule of DLQ replay jobs (the report runs' rule): a running job whose worker's
heartbeat has been silent for ANALYTICS_ABANDONED_AFTER is shown failed by the pages that read it,
with how far it got; a job that beats recently keeps running. No cluster: the pages read the job's
row only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.models import ReplayJob
from console.tasks import replay_dead_letters
from core.models import AuditRecord

pytestmark = pytest.mark.django_db


def running_job(beat_age_s: float, group: str = "g") -> ReplayJob:
    beat = timezone.now() - timedelta(seconds=beat_age_s)
    return ReplayJob.objects.create(namesrv="127.0.0.1:1", group=group, target="original",
                                    status=ReplayJob.STATUS_RUNNING, total=8, sent=3,
                                    started_at=beat, heartbeat_at=beat)  # fmt: skip


@pytest.fixture(autouse=True)
def rule(settings):
    settings.ANALYTICS_HEARTBEAT_SECONDS = 15
    settings.ANALYTICS_ABANDONED_AFTER = 60


def test_a_silent_job_is_failed_when_its_page_is_read_and_a_beating_one_is_not(viewer_client):
    silent, beating = running_job(beat_age_s=300, group="silent"), running_job(beat_age_s=5, group="beating")

    page = viewer_client.get(reverse("console:replay_job", kwargs={"job_id": silent.pk}))
    assert page.status_code == 200
    silent.refresh_from_db()
    assert silent.status == ReplayJob.STATUS_FAILED and silent.finished_at is not None
    assert "the worker replaying this job stopped; 3 of 8 sent, the rest not replayed" in silent.detail
    assert silent.detail in page.content.decode()
    beating.refresh_from_db()
    assert beating.status == ReplayJob.STATUS_RUNNING and not beating.detail
    finished = AuditRecord.objects.filter(target="%DLQ%silent", result=AuditRecord.RESULT_FAILED)
    assert finished.count() == 1


def test_the_jobs_list_and_the_progress_partial_apply_the_rule(viewer_client):
    listed, polled = running_job(beat_age_s=300), running_job(beat_age_s=300)
    viewer_client.get(reverse("console:replay_jobs"))
    listed.refresh_from_db()
    assert listed.status == ReplayJob.STATUS_FAILED
    old = running_job(beat_age_s=300)
    partial = viewer_client.get(
        reverse("console:replay_job", kwargs={"job_id": old.pk}), HTTP_HX_REQUEST="true"
    )
    assert 'data-status="failed"' in partial.content.decode()
    polled.refresh_from_db()
    assert polled.status == ReplayJob.STATUS_FAILED


def test_a_job_failed_by_the_rule_is_not_resumed(viewer_client):
    """A redelivered task of the failed job replays nothing (its name server is never contacted)."""
    job = running_job(beat_age_s=300)
    viewer_client.get(reverse("console:replay_jobs"))
    assert replay_dead_letters(job.pk)["duplicate"] is True
    job.refresh_from_db()
    assert (job.status, job.sent) == (ReplayJob.STATUS_FAILED, 3)
