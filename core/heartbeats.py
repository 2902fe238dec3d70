"""Heartbeats of long jobs kept in a database row (a report run, a DLQ replay job): the worker
running the job touches the row's ``heartbeat_at`` from a thread of its own, and a running job whose
heartbeat is older than ``ANALYTICS_ABANDONED_AFTER`` seconds lost its worker (a worker killed by a
signal or by the kernel cannot record its own end)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

log = logging.getLogger(__name__)


@contextlib.contextmanager
def beating(rows: QuerySet, interval_s: float, name: str) -> Iterator[None]:
    """The heartbeat of any long job kept in a row (a report run, a DLQ replay job): while the
    block runs, set ``heartbeat_at`` of ``rows`` (the job's row while it is still running) every
    ``interval_s`` from a thread of its own."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(interval_s):
                try:
                    rows.update(heartbeat_at=timezone.now())
                except Exception:  # the database is away for a moment: the next beat may pass
                    log.warning("heartbeat of %s failed", name, exc_info=True)
        finally:
            connection.close()  # this thread's own database connection

    thread = threading.Thread(target=beat, name=f"{name}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def silent_since() -> datetime:
    """A running job whose last heartbeat is older than this lost its worker (the abandoned rule)."""
    return timezone.now() - timedelta(seconds=settings.ANALYTICS_ABANDONED_AFTER)
