"""Celery tasks of alerts: delivering one notification, retried with backoff by the worker."""

from __future__ import annotations

from celery import shared_task

from .delivery import attempt

DELIVER_NOTIFICATION = "alerts.tasks.deliver_notification"


@shared_task(name=DELIVER_NOTIFICATION, bind=True, max_retries=None, acks_late=True)
def deliver_notification(self, notification_id: int) -> str:
    # The attempt bound is ALERT_WEBHOOK_MAX_ATTEMPTS, counted on the row (it survives worker
    # restarts), so Celery's own retry limit is off.
    outcome = attempt(notification_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status
