"""Which notifications an event's transition makes, and handing them to the Celery worker.

Each receiver (a webhook URL; the e-mail addresses together) gets one notification when the event
starts firing and one when it resolves. A notification made while a silence covers the event is kept
as *suppressed* (the events page says by which silence) and not sent; a resolution goes only to
receivers the firing was sent to (not to one whose firing a silence held back, nor to one added
to the rule since). If a silence ends while its event still fires, the firing
notification held back goes out then. Delivery is the worker's (``alerts.tasks``), queued once the
evaluation's transaction has committed, never done in the evaluator or a request.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction

from .models import AlertEvent, Notification, Silence

log = logging.getLogger(__name__)


def receivers(event: AlertEvent) -> list[tuple[str, str]]:
    """(channel, target) pairs: the rule's own and the settings' defaults, each once."""
    rule = event.rule
    urls = ([rule.webhook_url] if rule and rule.webhook_url else []) + list(settings.ALERT_WEBHOOK_URLS)
    addresses = (rule.email_recipients() if rule else []) + list(settings.ALERT_EMAIL_TO)
    pairs = [(Notification.WEBHOOK, url) for url in dict.fromkeys(urls)]
    if addresses:
        pairs.append((Notification.EMAIL, ", ".join(dict.fromkeys(addresses))[:500]))
    return pairs


def silence_for(event: AlertEvent, silences: list[Silence], now: datetime) -> Silence | None:
    return next((s for s in silences if s.silences(event, now)), None)


def for_transitions(
    transitions: list[tuple[AlertEvent, str]], silences: list[Silence], now: datetime
) -> list[int]:
    """Notification rows for each (event, FIRING or RESOLVED); returns the ids queued for delivery."""
    if not transitions:
        return []
    told = _told_of_firing([e.id for e, kind in transitions if kind == Notification.RESOLVED])
    rows = []
    for event, kind in transitions:
        silence = silence_for(event, silences, now)
        for channel, target in receivers(event):
            if kind == Notification.RESOLVED and (event.id, channel, target) not in told:
                continue  # this receiver never heard it fire (silenced, or added since)
            row = Notification(event=event, kind=kind, channel=channel, target=target, created_at=now)
            if silence is not None:
                row.status, row.detail = Notification.SUPPRESSED, f"silenced: {silence}"[:300]
            rows.append(row)
    Notification.objects.bulk_create(rows, ignore_conflicts=False)
    queued = [row.id for row in rows if row.status == Notification.QUEUED]
    _enqueue(queued)
    return queued


def _told_of_firing(event_ids: list[int]) -> set[tuple[int, str, str]]:
    if not event_ids:
        return set()
    sent = Notification.objects.filter(event_id__in=event_ids, kind=Notification.FIRING).exclude(
        status=Notification.SUPPRESSED
    )
    return set(sent.values_list("event_id", "channel", "target"))


def release_unsilenced(cluster: str, silences: list[Silence], now: datetime) -> list[int]:
    """Firing notifications held back by a silence that has ended, their event still firing."""
    held = list(
        Notification.objects.filter(
            kind=Notification.FIRING,
            status=Notification.SUPPRESSED,
            event__state=AlertEvent.FIRING,
            event__cluster=cluster,
        ).select_related("event")
    )
    release = [n for n in held if silence_for(n.event, silences, now) is None]
    for row in release:
        row.status, row.detail = Notification.QUEUED, "held back by a silence that has ended"
    Notification.objects.bulk_update(release, ["status", "detail"])
    ids = [row.id for row in release]
    _enqueue(ids)
    return ids


def _enqueue(ids: list[int]) -> None:
    if not ids:
        return
    from .tasks import deliver_notification

    def send() -> None:
        for notification_id in ids:
            try:
                deliver_notification.delay(notification_id)
            except Exception as exc:  # the Celery transport is down: say so on the row, go on
                log.exception("could not queue alert notification %s", notification_id)
                Notification.objects.filter(pk=notification_id).update(
                    status=Notification.FAILED,
                    last_error=f"could not queue: {type(exc).__name__}: {exc}"[:500],
                )

    transaction.on_commit(send)
