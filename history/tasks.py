"""The metric-history beat task: sample every configured cluster, then roll up and prune.

Its schedule (``history-sample``, every ``HISTORY_SAMPLE_SECONDS``) is created at ``migrate`` when
missing (see ``apps``) and is then the operator's: edit or disable it in /admin/ like any beat
entry. A run older than its interval when a worker gets to it has expired (the schedule's
``expire_seconds``): a backlog of samples is not worth collecting late.
"""

from __future__ import annotations

import logging

from celery import shared_task

from core import cluster_access
from history import retention, sampler

log = logging.getLogger(__name__)

SAMPLE_TASK = "history.sample"


@shared_task(name=SAMPLE_TASK, ignore_result=True)
def sample_clusters() -> dict:
    """One cycle of every cluster in BROKER_NAMESRV; one cluster failing does not stop the others."""
    summary: dict = {"clusters": {}}
    for cluster in cluster_access.namesrv_choices():
        try:
            result = sampler.sample(cluster, cluster_access.admin_for(cluster))
        except Exception:  # a bug or a database error must not stop the other clusters' samples
            log.exception("history: sampling %s failed", cluster)
            summary["clusters"][cluster] = {"failed": True}
            continue
        cycle = result.cycle
        summary["clusters"][cluster] = {
            "points": cycle.points,
            "seconds": cycle.seconds,
            "requests": cycle.requests,
            "errors": len(cycle.errors),
        }
    done = retention.maintain()
    summary["maintenance"] = vars(done)
    return summary
