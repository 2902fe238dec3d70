"""Sending one notification: a webhook's JSON POST or an e-mail, one attempt at a time.

``attempt(notification_id)`` makes one try and says whether (and after how long) to try again; the
Celery task (``alerts.tasks``) does the waiting. Attempts are bounded (ALERT_WEBHOOK_MAX_ATTEMPTS),
each POST by a timeout, the backoff doubles up to a cap. A try first claims the row (a conditional
update of its attempt count), so two workers handed the same message never both send it.

The webhook body follows Alertmanager's webhook format (``status``, ``alerts`` with ``labels``,
``annotations``, ``startsAt``/``endsAt``), so receivers written for it work; the console's own
fields are under ``event``. The ``Idempotency-Key`` header is the same on every retry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse

from core import clock

from . import webhook_target
from .models import AlertEvent, Notification
from .webhook_target import WebhookFailed, WebhookRefused

USER_AGENT = "pyrocket-console-alerts/1"


@dataclass(frozen=True)
class Outcome:
    status: str
    retry_in: float | None = None  # seconds until the next try, None: no further try


def backoff(attempts_made: int) -> float:
    base = settings.ALERT_WEBHOOK_BACKOFF_SECONDS
    return min(base * 2 ** max(attempts_made - 1, 0), settings.ALERT_WEBHOOK_BACKOFF_MAX_SECONDS)


def attempt(notification_id: int) -> Outcome:
    row = Notification.objects.select_related("event", "event__rule").filter(pk=notification_id).first()
    if row is None or row.status != Notification.QUEUED:
        return Outcome(row.status if row else "gone")
    claimed = Notification.objects.filter(
        pk=row.pk, status=Notification.QUEUED, attempts=row.attempts
    ).update(attempts=row.attempts + 1)
    if not claimed:
        return Outcome("taken")  # another worker is on it
    row.attempts += 1
    try:
        if row.channel == Notification.WEBHOOK:
            post_webhook(row.target, payload(row), f"pyrocket-notification-{row.pk}")
        else:
            send_email(row)
    except WebhookRefused as exc:  # an address no retry would change: given up at once
        _finish(row, Notification.FAILED, f"refused: {exc}")
        return Outcome(Notification.FAILED)
    except Exception as exc:
        # A webhook's failure is a status or an error class (the receiver's words stay out of
        # the event page); an e-mail's is the mail server's answer.
        error = str(exc) if isinstance(exc, WebhookFailed) else f"{type(exc).__name__}: {exc}"[:500]
        if row.attempts >= settings.ALERT_WEBHOOK_MAX_ATTEMPTS:
            _finish(row, Notification.FAILED, f"gave up after {row.attempts} attempts; last: {error}")
            return Outcome(Notification.FAILED)
        Notification.objects.filter(pk=row.pk).update(last_error=error)
        return Outcome(Notification.QUEUED, backoff(row.attempts))
    _finish(row, Notification.DELIVERED, "")
    return Outcome(Notification.DELIVERED)


def _finish(row: Notification, status: str, error: str) -> None:
    delivered_at = clock.now() if status == Notification.DELIVERED else None
    Notification.objects.filter(pk=row.pk).update(
        status=status, last_error=error[:500], delivered_at=delivered_at
    )


def post_webhook(url: str, body: dict, idempotency_key: str) -> None:
    """One POST (see webhook_target: checked addresses, no redirects, a status for an error)."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Idempotency-Key": idempotency_key,
    }
    webhook_target.post(url, json.dumps(body).encode(), headers, settings.ALERT_WEBHOOK_TIMEOUT_SECONDS)


def event_url(event: AlertEvent) -> str:
    path = reverse("alerts:event_detail", args=[event.pk])
    return f"{settings.ALERT_CONSOLE_URL}{path}" if settings.ALERT_CONSOLE_URL else path


def _iso(moment) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def payload(row: Notification) -> dict:
    event = row.event
    labels = {"alertname": event.rule_name, "severity": event.severity, **event.subject_fields}
    event_fields = {
        "id": event.pk,
        "rule": event.rule_name,
        "kind": event.rule.kind if event.rule else "",
        "severity": event.severity,
        "state": row.kind,
        "subject": event.subject_fields,
        "value": event.value,
        "threshold": event.threshold,
        "summary": event.summary,
        "startedAt": _iso(event.started_at),
        "firingAt": _iso(event.firing_at),
        "resolvedAt": _iso(event.resolved_at) if row.kind == Notification.RESOLVED else None,
        "resolution": event.resolution,
        "url": event_url(event),
    }
    alert = {
        "status": row.kind,
        "labels": labels,
        "annotations": {"summary": event.summary},
        "startsAt": _iso(event.firing_at or event.started_at),
        "endsAt": _iso(event.resolved_at) if row.kind == Notification.RESOLVED else "0001-01-01T00:00:00Z",
        "generatorURL": event_fields["url"],
    }
    return {
        "version": "4",
        "receiver": "pyrocket-console",
        "status": row.kind,
        "groupKey": f"{event.rule_name}:{event.subject}",
        "commonLabels": labels,
        "alerts": [alert],
        "event": event_fields,
    }


def send_email(row: Notification) -> None:
    event = row.event
    subject = f"[{row.kind.upper()}] {event.rule_name}: {event.subject_text}"[:200]
    lines = [
        event.summary,
        "",
        f"Rule: {event.rule_name} ({event.severity})",
        f"Subject: {event.subject_text}",
        f"Value: {event.value_text} (threshold {event.threshold_text})",
        f"Started: {_iso(event.started_at)}",
        f"Firing since: {_iso(event.firing_at)}",
    ]
    if row.kind == Notification.RESOLVED:
        lines.append(
            f"Resolved: {_iso(event.resolved_at)}" + (f" ({event.resolution})" if event.resolution else "")
        )
    lines += ["", f"Event: {event_url(event)}"]
    recipients = [address.strip() for address in row.target.split(",") if address.strip()]
    send_mail(subject, "\n".join(lines), settings.ALERT_EMAIL_FROM, recipients, fail_silently=False)
