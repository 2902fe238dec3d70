"""W17: a Grafana dashboard over the console's ``/metrics`` families (``console.metrics``).

Built as a plain dict (Grafana's dashboard JSON model, schemaVersion 39) so it can be served as a
download and imported as it is: a ``datasource`` variable picks the Prometheus that scrapes the
console, and ``cluster`` / ``broker`` / ``topic`` / ``group`` variables (``label_values`` queries,
multi-select, "All" by default) narrow every panel. Each panel's expression names only families the
console exports, so the dashboard shows the same figures as the console's own pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.promql import change_over

SCHEMA_VERSION = 39
DASHBOARD_UID = "pyrocket-console"
DASHBOARD_TITLE = "pyrocket (RocketMQ) cluster"

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
BROKER_SELECTOR = 'cluster=~"$cluster", broker=~"$broker"'
TOPIC_SELECTOR = 'topic=~"$topic"'
GROUP_SELECTOR = 'group=~"$group"'

# Grafana's grid is 24 columns wide.
GRID_WIDTH = 24


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # Grafana panel type: stat, timeseries, gauge
    exprs: tuple[tuple[str, str], ...]  # (PromQL, legend)
    unit: str = "short"
    width: int = 12
    height: int = 8
    description: str = ""
    thresholds: tuple[tuple[str, float | None], ...] = (("green", None),)


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


BROKER_LEGEND = "{{broker}} {{broker_id}} ({{addr}})"

ROWS: tuple[Row, ...] = (
    Row(
        "Health",
        (
            Panel(
                "Brokers up",
                "stat",
                ((f"sum(rocketmq_broker_up{{{BROKER_SELECTOR}}})", "up"),),
                width=6,
                height=4,
                description="Brokers that answered the console's last collection.",
            ),
            Panel(
                "Brokers down",
                "stat",
                ((f"count(rocketmq_broker_up{{{BROKER_SELECTOR}}} == 0) or vector(0)", "down"),),
                width=6,
                height=4,
                description="Brokers registered on the name server that did not answer.",
                thresholds=(("green", None), ("red", 1)),
            ),
            Panel(
                "Stores refusing writes",
                "stat",
                (
                    (
                        f"count(rocketmq_broker_store_writable{{{BROKER_SELECTOR}}} == 0) or vector(0)",
                        "refusing",
                    ),
                ),
                width=6,
                height=4,
                description="Brokers whose store refuses writes (a full disk, say).",
                thresholds=(("green", None), ("red", 1)),
            ),
            Panel(
                "Collection errors",
                "stat",
                (("rocketmq_console_collect_errors", "errors"),),
                width=6,
                height=4,
                description="Admin requests that failed in the console's last collection.",
                thresholds=(("green", None), ("orange", 1)),
            ),
        ),
    ),
    Row(
        "Brokers",
        (
            Panel(
                "Put TPS",
                "timeseries",
                ((f"rocketmq_broker_put_tps{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="ops",
                description="Messages put per second (the broker's 10-second average).",
            ),
            Panel(
                "Get TPS",
                "timeseries",
                ((f"rocketmq_broker_get_tps{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="ops",
                description="Messages read per second (the broker's 10-second average).",
            ),
            Panel(
                "Messages in / out per 5 minutes",
                "timeseries",
                (
                    (
                        f"increase(rocketmq_broker_put_messages_total{{{BROKER_SELECTOR}}}[5m])",
                        "in " + BROKER_LEGEND,
                    ),
                    (
                        f"increase(rocketmq_broker_get_messages_total{{{BROKER_SELECTOR}}}[5m])",
                        "out " + BROKER_LEGEND,
                    ),
                ),
                description="From the brokers' counters since start (increase() handles a restart).",
            ),
            Panel(
                "Commit-log disk used",
                "gauge",
                ((f"rocketmq_broker_commitlog_disk_ratio{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="percentunit",
                description="Used fraction of the disk holding the commit log.",
                thresholds=(("green", None), ("orange", 0.75), ("red", 0.9)),
            ),
            Panel(
                "Request wait",
                "timeseries",
                ((f"rocketmq_broker_request_wait_ms{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="ms",
                description="How long a request arriving now waits before the broker serves it.",
            ),
            Panel(
                "Replication lag (bytes)",
                "timeseries",
                ((f"rocketmq_broker_replication_lag_bytes{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="bytes",
                description="Commit-log bytes a slave does not have yet.",
            ),
            Panel(
                "Replication lag (seconds)",
                "timeseries",
                ((f"rocketmq_broker_replication_lag_seconds{{{BROKER_SELECTOR}}}", BROKER_LEGEND),),
                unit="s",
                description="Age of the oldest message a master's furthest slave does not have yet.",
            ),
        ),
    ),
    Row(
        "Topics",
        (
            Panel(
                "Messages written per second by topic",
                "timeseries",
                ((f"rate(rocketmq_topic_messages_total{{{TOPIC_SELECTOR}}}[5m])", "{{topic}}"),),
                unit="ops",
                width=24,
                description="From the sum of the topic's queue max offsets.",
            ),
        ),
    ),
)


def _group_row() -> Row:
    """Built when the dashboard is: the dead-letter panel steps at ``HISTORY_SAMPLE_SECONDS``."""
    # The DLQ topic's written count is born with the topic, at the first dead letter, so
    # increase() of it missed that first batch; the group's dead-letter gauge is scraped from the
    # group's first scrape on (0 before any dead letter), and its rises are added as the "Dead
    # letters arriving" rule adds them (change_over argues why not increase or delta).
    arrived = change_over(f"rocketmq_group_dlq_messages{{{GROUP_SELECTOR}}}", "1h", rises_only=True)
    return Row(
        "Consumer groups",
        (
            Panel(
                "Lag",
                "timeseries",
                ((f"rocketmq_group_lag{{{GROUP_SELECTOR}}}", "{{group}}"),),
                description="Messages not yet consumed by the group.",
            ),
            Panel(
                "Top 10 groups by lag",
                "timeseries",
                ((f"topk(10, rocketmq_group_lag{{{GROUP_SELECTOR}}})", "{{group}}"),),
            ),
            Panel(
                "Consume TPS",
                "timeseries",
                ((f"rocketmq_group_consume_tps{{{GROUP_SELECTOR}}}", "{{group}}"),),
                unit="ops",
            ),
            Panel(
                "Online consumers",
                "timeseries",
                ((f"rocketmq_group_clients{{{GROUP_SELECTOR}}}", "{{group}}"),),
            ),
            Panel(
                "Dead letters per hour",
                "timeseries",
                ((arrived, "{{group}}"),),
                width=24,
                description=(
                    "Messages that arrived in the group's dead-letter topic (%DLQ%<group>) in the"
                    " hour up to each point: the rises of its count step by step (the console's"
                    " sampling interval), the first batch included; a count falling as retention"
                    " deletes dead letters hides none."
                ),
            ),
        ),
    )


def _variable(name: str, label: str, metric: str, label_name: str) -> dict:
    query = f"label_values({metric}, {label_name})"
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "refresh": 2,  # on time-range change: new brokers, topics and groups appear
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
    }


def _templating() -> dict:
    return {
        "list": [
            {
                "name": "datasource",
                "label": "Prometheus",
                "type": "datasource",
                "query": "prometheus",
                "current": {},
                "hide": 0,
                "refresh": 1,
            },
            _variable("cluster", "Cluster", "rocketmq_broker_up", "cluster"),
            _variable("broker", "Broker", 'rocketmq_broker_up{cluster=~"$cluster"}', "broker"),
            _variable("topic", "Topic", "rocketmq_topic_messages_total", "topic"),
            _variable("group", "Group", "rocketmq_group_lag", "group"),
        ]
    }


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict:
    steps = [{"color": color, "value": value} for color, value in panel.thresholds]
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(panel.exprs)
        ],
    }


def dashboard() -> dict:
    """The dashboard model, ready for ``json.dumps`` and Grafana's "Import dashboard"."""
    panels: list[dict] = []
    next_id, y = 1, 0
    for row in (*ROWS, _group_row()):
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id, y = next_id + 1, y + 1
        x, row_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:  # wrap to the next line of the grid
                x, y, row_height = 0, y + row_height, 0
            panels.append(_panel(panel, next_id, x, y))
            next_id, x, row_height = next_id + 1, x + panel.width, max(row_height, panel.height)
        y += row_height
    return {
        "uid": DASHBOARD_UID,
        "title": DASHBOARD_TITLE,
        "description": "Figures the pyrocket console exports at /metrics (brokers, topics, consumer groups).",
        "tags": ["rocketmq", "pyrocket"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "browser",
        "templating": _templating(),
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def panel_exprs(model: dict) -> list[tuple[str, str]]:
    """(panel title, expression) of every query of the dashboard, row panels excluded."""
    return [
        (panel["title"], target["expr"])
        for panel in model["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]
