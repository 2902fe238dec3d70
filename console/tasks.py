"""Celery tasks of the console: long operations that must not hold a web request.

``replay_dead_letters`` replays a ReplayJob (selected dead letters, or all matching a filter)
at the job's rate, saving progress every few messages so the page can poll it. Each replayed
message gets its audit record as a single replay does (``replay_audit``), saved with the progress,
so the message trace shows bulk replays too.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from broker.client.admin import MQClientError
from broker.common.topic_config import dlq_topic
from console import replay_audit
from console.models import ReplayJob
from console.services import dlq
from core import cluster_access
from core.audit import audit_record
from core.heartbeats import beating, silent_since
from core.models import AuditRecord

log = logging.getLogger(__name__)
MAX_RECORDED_ERRORS = 100
PROGRESS_EVERY_S = 0.5


def _messages_of(job: ReplayJob) -> tuple[list, list[dict]]:
    """The dead letters to replay, and an error per selected id that names no dead letter of the
    group (one bad id must not cost the whole job)."""
    admin = cluster_access.admin_for(job.namesrv)
    if not job.message_ids:
        flt = dlq.DeadLetterFilter(**job.filters)
        return [i.message for i in dlq.list_dead_letters(admin, job.group, flt, newest_per_queue=100_000)], []
    messages, errors = [], []
    for msg_id in job.message_ids:
        try:
            messages.extend(dlq.find_dead_letters(admin, job.group, [msg_id]))
        except (ValueError, MQClientError) as exc:
            errors.append({"msgId": msg_id, "error": str(exc)})
    return messages, errors


def _replay(job: ReplayJob, messages: list) -> None:
    """Send the copies at the job's rate; progress and the messages' audit records are saved
    together every ``PROGRESS_EVERY_S`` and at the end."""
    scope = "selected" if job.message_ids else "all"
    records: list[AuditRecord] = []
    last_save = time.monotonic()
    producer = cluster_access.producer_for(job.namesrv)
    try:
        for outcome in dlq.replay(producer, job.group, messages, job.target, job.rate_per_second):
            if outcome.error:
                job.failed += 1
                if len(job.errors) < MAX_RECORDED_ERRORS:
                    job.errors.append({"msgId": outcome.step.offset_msg_id, "error": outcome.error})
            else:
                job.sent += 1
            fields = replay_audit.outcome_fields(outcome, scope=scope, target=job.target, job=job.pk)
            records.append(audit_record(job.user, replay_audit.REPLAY, dlq_topic(job.group), **fields))
            if time.monotonic() - last_save >= PROGRESS_EVERY_S:
                _save_progress(job, records)
                last_save = time.monotonic()
    finally:  # what was sent is recorded even when the job stops half-way
        _save_progress(job, records)


def _save_progress(job: ReplayJob, records: list[AuditRecord]) -> None:
    job.heartbeat_at = timezone.now()
    with transaction.atomic():
        job.save(update_fields=["sent", "failed", "errors", "heartbeat_at"])
        AuditRecord.objects.bulk_create(records)
    records.clear()


@shared_task(name="console.replay_dead_letters")
def replay_dead_letters(job_id: int) -> dict:
    # Claim the job: only the delivery that moves it out of pending replays it. A task message
    # delivered twice (Redis restores unacknowledged messages to the queue, a worker killed between
    # receiving and acknowledging, a retried publish) would otherwise send every copy again,
    # possibly on two workers at once.
    # A job failed by the abandoned rule stays failed: its worker may have sent more than it
    # recorded, so resuming it could send copies twice.
    now = timezone.now()
    claimed = ReplayJob.objects.filter(pk=job_id, status=ReplayJob.STATUS_PENDING).update(
        status=ReplayJob.STATUS_RUNNING, started_at=now, heartbeat_at=now
    )
    job = ReplayJob.objects.get(pk=job_id)
    if not claimed:
        log.warning("replay job %s is %s already: this delivery replays nothing", job_id, job.status)
        return {"sent": job.sent, "failed": job.failed, "status": job.status, "duplicate": True}
    running = ReplayJob.objects.filter(pk=job_id, status=ReplayJob.STATUS_RUNNING)
    with beating(running, settings.ANALYTICS_HEARTBEAT_SECONDS, f"replay-job-{job_id}"):
        return _run_claimed(job)


def _run_claimed(job: ReplayJob) -> dict:
    job_id = job.pk
    try:
        messages, lookup_errors = _messages_of(job)
        job.total = len(messages) + len(lookup_errors)
        job.failed, job.errors = len(lookup_errors), lookup_errors[:MAX_RECORDED_ERRORS]
        job.save(update_fields=["total", "failed", "errors"])
        _replay(job, messages)
        job.status = ReplayJob.STATUS_DONE
    except Exception as exc:  # the job record must say why it stopped; the worker keeps running
        log.exception("replay job %s failed", job_id)
        job.status, job.detail = ReplayJob.STATUS_FAILED, f"{type(exc).__name__}: {exc}"
    job.finished_at = timezone.now()
    job.save()
    result = (
        AuditRecord.RESULT_OK
        if job.status == ReplayJob.STATUS_DONE and not job.failed
        else AuditRecord.RESULT_FAILED
    )
    audit_record(
        job.user,
        replay_audit.REPLAY_FINISHED,
        dlq_topic(job.group),
        {"job": job.pk, "target": job.target, "total": job.total},
        result,
        f"sent {job.sent}, failed {job.failed}" + (f"; {job.detail}" if job.detail else ""),
    ).save()
    return {"sent": job.sent, "failed": job.failed, "status": job.status}


def fail_abandoned_jobs() -> int:
    """Mark failed the running replay jobs whose worker stopped (no heartbeat for
    ``ANALYTICS_ABANDONED_AFTER`` seconds, the report runs' rule); return how many. The pages call
    this when they read jobs: a killed worker cannot record its own end."""
    cutoff = silent_since()
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)
    failed = 0
    for job in ReplayJob.objects.filter(silent, status=ReplayJob.STATUS_RUNNING):
        last_sign = job.heartbeat_at or job.created_at  # (jobs started before heartbeats existed)
        job.detail = (
            f"the worker replaying this job stopped; {job.sent} of {job.total} sent, the rest not "
            f"replayed (no heartbeat since {last_sign.isoformat(timespec='seconds')}, expected every "
            f"{settings.ANALYTICS_HEARTBEAT_SECONDS:g} s). Copies sent after its last progress save "
            f"may not be counted; start a new replay for the dead letters still wanted."
        )
        job.status, job.finished_at = ReplayJob.STATUS_FAILED, timezone.now()
        # Only if it is still silent: a worker that beat meanwhile keeps its job.
        if ReplayJob.objects.filter(pk=job.pk, status=ReplayJob.STATUS_RUNNING,
                                    heartbeat_at=job.heartbeat_at).update(
            status=job.status, finished_at=job.finished_at, detail=job.detail
        ):  # fmt: skip
            failed += 1
            audit_record(job.user, replay_audit.REPLAY_FINISHED, dlq_topic(job.group),
                         {"job": job.pk, "target": job.target, "total": job.total},
                         AuditRecord.RESULT_FAILED, f"sent {job.sent}, failed {job.failed}; {job.detail}",
                         ).save()  # fmt: skip
    return failed
