"""Metric history storage.

A *series* is one metric of one thing (a broker, topic, group or cluster) of one configured cluster;
its points are stored narrow (series id, time, value) so a cycle of thousands of figures is one bulk
insert of small rows. Raw points are kept ``HISTORY_RAW_DAYS``; 5-minute rollups (avg/min/max/last,
and a counter's growth) ``HISTORY_ROLLUP_DAYS``. Indexes fit both SQLite and PostgreSQL: a series'
points by time (charts), and time alone (retention deletes the oldest first).
"""

from __future__ import annotations

from django.db import models


class Series(models.Model):
    # The BROKER_NAMESRV entry the figures come from (two configured clusters may both be called
    # "DefaultCluster"; the name server they answer on tells them apart).
    cluster = models.CharField(max_length=255)
    metric = models.CharField(max_length=64)
    scope = models.CharField(max_length=8)  # broker | topic | group | cluster
    # The broker ("brokerName:brokerId"), topic, group or RocketMQ cluster name.
    name = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "metric", "scope", "name"], name="history_series_key")
        ]
        indexes = [models.Index(fields=["metric", "scope", "cluster"], name="history_series_metric")]

    def __str__(self) -> str:
        return f"{self.cluster} {self.scope} {self.name} {self.metric}"


class Point(models.Model):
    id = models.BigAutoField(primary_key=True)
    # The (series, taken_at) index serves the foreign key too: no separate index on series alone.
    series = models.ForeignKey(Series, on_delete=models.CASCADE, db_index=False, related_name="+")
    taken_at = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["series", "taken_at"], name="history_point_series_time"),
            models.Index(fields=["taken_at"], name="history_point_time"),
        ]


class Rollup(models.Model):
    """A series over one 5-minute bucket [start, start + 5 min)."""

    id = models.BigAutoField(primary_key=True)
    series = models.ForeignKey(Series, on_delete=models.CASCADE, db_index=False, related_name="+")
    start = models.DateTimeField()
    count = models.IntegerField()
    value_avg = models.FloatField()
    value_min = models.FloatField()
    value_max = models.FloatField()
    value_last = models.FloatField()
    # A counter's growth over the bucket, from its value before the bucket (its previous bucket's
    # last) through each point, a restart counting from zero: what arrived, exactly, even when the
    # broker restarted inside the bucket. None for a gauge (and rollups made before the column).
    value_increase = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "start"], name="history_rollup_key")]
        indexes = [models.Index(fields=["start"], name="history_rollup_time")]


class Cycle(models.Model):
    """One sampling of one cluster: when, what it cost, what failed. The newest cycle's timestamp
    is "now" for ``query.latest``."""

    id = models.BigAutoField(primary_key=True)
    cluster = models.CharField(max_length=255)
    taken_at = models.DateTimeField()
    seconds = models.FloatField(default=0.0)
    requests = models.IntegerField(default=0)
    points = models.IntegerField(default=0)
    errors = models.JSONField(default=list)

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "taken_at"], name="history_cycle_time"),
            models.Index(fields=["taken_at"], name="history_cycle_age"),
        ]
