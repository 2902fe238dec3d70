"""Report runs and their rows: everything a run's page shows lives here, so a run survives a web
or worker restart."""

from __future__ import annotations

from django.db import models

from analytics.spark.catalog import REPORT_SECTIONS

REPORT_LABELS = {
    "all": "All reports",
    "throughput": "Throughput per topic per hour",
    "sizes": "Message size distribution",
    "latency": "Store latency (store - born)",
    "retry_dlq": "Retry and DLQ rates per consumer group",
    "delay": "Delay-level usage",
    "transactions": "Transaction outcomes",
    "top": "Top keys and tags",
}
REPORT_CHOICES = [(name, REPORT_LABELS[name]) for name in REPORT_SECTIONS]


class ReportRun(models.Model):
    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]
    TRIGGER_CONSOLE, TRIGGER_SCHEDULE = "console", "schedule"

    report = models.CharField(max_length=32, choices=REPORT_CHOICES)
    input_uri = models.CharField(max_length=1024)
    start_time = models.DateTimeField(null=True, blank=True, help_text="inclusive; empty = from the first")
    end_time = models.DateTimeField(null=True, blank=True, help_text="exclusive; empty = up to the last")
    topics = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=QUEUED, db_index=True)
    progress = models.PositiveSmallIntegerField(default=0)
    stage = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    trigger = models.CharField(max_length=16, default=TRIGGER_CONSOLE)
    schedule_name = models.CharField(max_length=200, blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    celery_task_id = models.CharField(max_length=255, blank=True)
    spark_master = models.CharField(max_length=255, blank=True)
    output_dir = models.CharField(max_length=1024, blank=True)
    output_files = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Touched every ANALYTICS_HEARTBEAT_SECONDS by the worker running the job: a run whose
    # heartbeat stopped lost its worker (killed, out of memory, machine gone).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.report}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.DONE, self.FAILED)

    @property
    def report_label(self) -> str:
        return REPORT_LABELS.get(self.report, self.report)

    def rows(self, section: str) -> list[dict]:
        return [row.values for row in self.report_rows.filter(section=section).order_by("position")]


class ReportRow(models.Model):
    """One row of one section of a run (a section is one table: throughput, size, …)."""

    run = models.ForeignKey(ReportRun, on_delete=models.CASCADE, related_name="report_rows")
    section = models.CharField(max_length=32)
    position = models.PositiveIntegerField()
    values = models.JSONField()

    class Meta:
        ordering = ["run", "section", "position"]
        indexes = [models.Index(fields=["run", "section", "position"])]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "section", "position"], name="analytics_row_unique_position"
            )
        ]
