from django.conf import settings
from django.db import models


class ReplayJob(models.Model):
    """A bulk dead-letter replay run by a Celery worker; the page polls its progress."""

    STATUS_PENDING = "pending"
    STATUS_RUNNING = "running"
    STATUS_DONE = "done"
    STATUS_FAILED = "failed"
    STATUS_CHOICES = [(s, s) for s in (STATUS_PENDING, STATUS_RUNNING, STATUS_DONE, STATUS_FAILED)]

    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    namesrv = models.CharField(max_length=512)  # the cluster the operator was looking at
    group = models.CharField(max_length=255)
    target = models.CharField(max_length=16)  # "original" or "retry"
    rate_per_second = models.FloatField(default=0)
    # The offsetMsgIds to replay; empty means every dead letter of the group matching ``filters``.
    message_ids = models.JSONField(default=list, blank=True)
    filters = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=STATUS_PENDING)
    total = models.IntegerField(default=0)
    sent = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)  # [{"msgId": ..., "error": ...}], first 100
    detail = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Touched every ANALYTICS_HEARTBEAT_SECONDS (and with each progress save) by the worker
    # replaying the job, as report runs are: a running job whose heartbeat stopped lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def done(self) -> int:
        return self.sent + self.failed

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else (100 if self.finished_at else 0)

    @property
    def finished(self) -> bool:
        return self.status in (self.STATUS_DONE, self.STATUS_FAILED)


class SavedTailFilter(models.Model):
    """A live-tail filter a user saved under a name, per topic pattern."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tail_filters")
    name = models.CharField(max_length=80)
    topic = models.CharField(max_length=255, blank=True)
    tags = models.CharField(max_length=2000, blank=True)
    sql = models.TextField(blank=True)
    key = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="unique_tail_filter_name")]
