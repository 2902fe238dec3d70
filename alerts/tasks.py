"""Celery tasks of alerts: delivering one notification, retried with backoff by the worker."""

from __future__ import annotations

from celery import shared_task

from .delivery import attempt

DELIVER_NOTIFICATION = "alerts.tasks.deliver_notification"
# One attempt is one POST, bounded by ALERT_WEBHOOK_TIMEOUT_SECONDS, or one e-mail (bounded by
# EMAIL_TIMEOUT): past the soft limit something hangs that no timeout covers, and the attempt
# ends (SoftTimeLimitExceeded is a failed attempt, retried); the hard limit kills the worker
# child if even that does not return.
SOFT_TIME_LIMIT_S = 60
TIME_LIMIT_S = 90


@shared_task(
    name=DELIVER_NOTIFICATION,
    bind=True,
    max_retries=None,
    acks_late=True,
    soft_time_limit=SOFT_TIME_LIMIT_S,
    time_limit=TIME_LIMIT_S,
)
def deliver_notification(self, notification_id: int) -> str:
    # The attempt bound is ALERT_WEBHOOK_MAX_ATTEMPTS, counted on the row (it survives worker
    # restarts), so Celery's own retry limit is off.
    outcome = attempt(notification_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status
