"""The history charts of the console's pages: which catalogue metrics each chart draws, the windows
it offers, and its answer as JSON-ready data (``chart_data``).

One home for "the group page charts lag, consume TPS and DLQ messages": the page partial
(``history/_charts.html``), the JSON view and the tests all read ``CHARTS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from core import clock
from history import catalogue, query
from history.models import Series

WINDOWS: dict[str, timedelta] = {
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(days=7),
}
# A cluster page of a large installation still answers with a readable chart.
MAX_LINES = 40


@dataclass(frozen=True)
class Line:
    metric: str
    label: str  # appended to the thing's name on pages that chart several things

    def entry(self, scope: str) -> catalogue.Metric:
        return catalogue.get(self.metric, scope)


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    hint: str
    scope: str  # of the series drawn
    lines: tuple[Line, ...]
    # True on the cluster page: one line per broker member per metric, no name asked for.
    every_member: bool = False


CHARTS: dict[str, tuple[Chart, ...]] = {
    "cluster": (
        Chart(
            "broker-tps",
            "Broker TPS history",
            "Messages put (in) and read (out) per second by each broker between two history samples.",
            "broker",
            (Line("tps_in", "in"), Line("tps_out", "out")),
            every_member=True,
        ),
        Chart(
            "disk",
            "Disk used",
            "Used share of each broker's commit-log disk.",
            "broker",
            (Line("disk_ratio", "disk"),),
            every_member=True,
        ),
    ),
    "broker": (
        Chart(
            "tps",
            "TPS history",
            "Messages put and read per second between two history samples.",
            "broker",
            (Line("tps_in", "in"), Line("tps_out", "out")),
        ),
        Chart(
            "request-wait",
            "Request wait",
            "How long a request arriving at the broker waited before it was served.",
            "broker",
            (Line("request_wait_ms", "request wait"),),
        ),
        Chart(
            "replication-lag",
            "Replication lag",
            "Commit-log bytes the furthest slave lacks, and the age of the oldest message it lacks.",
            "broker",
            (
                Line("replication_lag_bytes", "bytes behind"),
                Line("replication_lag_seconds", "seconds behind"),
            ),
        ),
    ),
    "topic": (
        Chart(
            "tps",
            "TPS history",
            "Messages written to the topic per second.",
            "topic",
            (Line("tps_in", "written"),),
        ),
        Chart(
            "size",
            "Size",
            "Messages the topic holds (all queues, max minus min offset).",
            "topic",
            (Line("stored", "stored"),),
        ),
    ),
    "group": (
        Chart(
            "lag", "Lag history", "Messages not yet consumed by the group.", "group", (Line("lag", "lag"),)
        ),
        Chart(
            "consume-tps",
            "Consume TPS",
            "Messages the group consumed per second.",
            "group",
            (Line("consume_tps", "consume TPS"),),
        ),
        Chart(
            "dlq",
            "Dead letters",
            "Messages in the group's dead-letter topic.",
            "group",
            (Line("dlq_messages", "DLQ messages"),),
        ),
    ),
}


def find(page: str, key: str) -> Chart | None:
    return next((chart for chart in CHARTS.get(page, ()) if chart.key == key), None)


def _shown(unit: str, value: float) -> float:
    """Ratios are drawn as percentages; every other unit as stored."""
    return round(value * 100, 2) if unit == "ratio" else round(value, 3)


def _unit_label(unit: str) -> str:
    return "%" if unit == "ratio" else unit


def _members(chart: Chart, cluster: str) -> list[str]:
    metrics = [line.metric for line in chart.lines]
    names = Series.objects.filter(cluster=cluster, scope=chart.scope, metric__in=metrics)
    return sorted(set(names.values_list("name", flat=True)))


def chart_data(chart: Chart, name: str, window: str, cluster: str) -> dict:
    """The chart's lines over the last ``window`` (a key of ``WINDOWS``): every point as
    ``[epoch ms, value]``. On the cluster page ``name`` is unused: every broker member is drawn."""
    until = clock.now()
    since = until - WINDOWS[window]
    names = _members(chart, cluster) if chart.every_member else [name]
    lines: list[dict[str, Any]] = []
    for member in names:
        for line in chart.lines:
            if len(lines) >= MAX_LINES:
                break
            unit = line.entry(chart.scope).unit
            points = query.series(line.metric, chart.scope, member, since, until, cluster=cluster)
            label = f"{member} {line.label}" if chart.every_member else line.label
            lines.append(
                {
                    "label": label,
                    "metric": line.metric,
                    "unit": _unit_label(unit),
                    "points": [[int(at.timestamp() * 1000), _shown(unit, value)] for at, value in points],
                }
            )
    step = query.step_for(until - since)
    return {
        "chart": chart.key,
        "title": chart.title,
        "window": window,
        "since": int(since.timestamp() * 1000),
        "until": int(until.timestamp() * 1000),
        "step_seconds": int(step.total_seconds()) if step else None,
        "lines": lines,
        "points": sum(len(line["points"]) for line in lines),
        "truncated": chart.every_member and len(names) * len(chart.lines) > MAX_LINES,
    }
