"""Celery tasks of the console: long operations that must not hold a web request.

``replay_dead_letters`` replays a ReplayJob (selected dead letters, or all matching a filter)
at the job's rate, saving progress every few messages so the page can poll it.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.utils import timezone

from broker.client.admin import MQAdminError
from console import cluster_access
from console.models import AuditRecord, ReplayJob
from console.views_ops import connection
from console.views_ops.services import dlq

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
        except (ValueError, MQAdminError) as exc:
            errors.append({"msgId": msg_id, "error": str(exc)})
    return messages, errors


@shared_task(name="console.replay_dead_letters")
def replay_dead_letters(job_id: int) -> dict:
    job = ReplayJob.objects.get(pk=job_id)
    job.status = ReplayJob.STATUS_RUNNING
    job.save(update_fields=["status"])
    try:
        messages, lookup_errors = _messages_of(job)
        job.total = len(messages) + len(lookup_errors)
        job.failed, job.errors = len(lookup_errors), lookup_errors[:MAX_RECORDED_ERRORS]
        job.save(update_fields=["total", "failed", "errors"])
        last_save = time.monotonic()
        for outcome in dlq.replay(
            connection.producer_for(job.namesrv), job.group, messages, job.target, job.rate_per_second
        ):
            if outcome.error:
                job.failed += 1
                if len(job.errors) < MAX_RECORDED_ERRORS:
                    job.errors.append({"msgId": outcome.step.offset_msg_id, "error": outcome.error})
            else:
                job.sent += 1
            if time.monotonic() - last_save >= PROGRESS_EVERY_S:
                job.save(update_fields=["sent", "failed", "errors"])
                last_save = time.monotonic()
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
    AuditRecord.objects.create(
        user=job.user,
        username=job.user.get_username() if job.user else "celery",
        action="dlq.replay.finished",
        target=f"%DLQ%{job.group}",
        parameters={"job": job.pk, "target": job.target, "total": job.total},
        result=result,
        detail=f"sent {job.sent}, failed {job.failed}" + (f"; {job.detail}" if job.detail else ""),
    )
    return {"sent": job.sent, "failed": job.failed, "status": job.status}
