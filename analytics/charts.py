"""Charts of a run, drawn server-side as PNG with matplotlib (no browser-side assets needed)."""

from __future__ import annotations

import io
from collections import defaultdict
from datetime import UTC, datetime

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.pyplot as plt

from .models import ReportRun

MAX_TOPIC_LINES = 8


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def throughput_chart(run: ReportRun) -> bytes:
    """Messages per hour of the busiest user topics."""
    series: dict[str, dict[int, int]] = defaultdict(dict)
    for row in run.rows("throughput"):
        if row["kind"] == "normal":
            series[row["topic"]][row["hour_start_ms"]] = row["messages"]
    busiest = sorted(series, key=lambda t: -sum(series[t].values()))[:MAX_TOPIC_LINES]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for topic in busiest:
        hours = sorted(series[topic])
        ax.plot([datetime.fromtimestamp(h / 1000, UTC) for h in hours], [series[topic][h] for h in hours],
                marker="o", label=topic)  # fmt: skip
    ax.set_title("Messages per hour (user topics)")
    ax.set_ylabel("messages")
    if busiest:
        ax.legend(fontsize="small")
    fig.autofmt_xdate()
    return _png(fig)


def _histogram_chart(rows: list[dict], title: str, unit: str) -> bytes:
    labels = [f"≤{row['le']}" if row["le"] is not None else "more" for row in rows]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(rows)), [row["messages"] for row in rows], color="#4a7fb5")
    ax.set_xticks(range(len(rows)), labels, rotation=45, fontsize="small")
    ax.set_title(title)
    ax.set_xlabel(unit)
    ax.set_ylabel("messages")
    return _png(fig)


def size_chart(run: ReportRun) -> bytes:
    return _histogram_chart(run.rows("size_histogram"), "Message body size distribution", "bytes")


def latency_chart(run: ReportRun) -> bytes:
    return _histogram_chart(run.rows("latency_histogram"), "Store latency distribution", "ms")


def dlq_chart(run: ReportRun) -> bytes:
    rows = run.rows("retry_dlq")
    fig, ax = plt.subplots(figsize=(8, 3.2))
    positions = range(len(rows))
    ax.bar([p - 0.2 for p in positions], [100 * (r["retry_rate"] or 0) for r in rows], 0.4, label="retried")
    ax.bar([p + 0.2 for p in positions], [100 * (r["dlq_rate"] or 0) for r in rows], 0.4, label="to DLQ")
    ax.set_xticks(list(positions), [r["group"] for r in rows])
    ax.set_title("Retry and DLQ rates per consumer group")
    ax.set_ylabel("% of source messages")
    ax.legend(fontsize="small")
    return _png(fig)


# chart name → (section it needs, drawing function)
CHARTS = {
    "throughput": ("throughput", throughput_chart),
    "sizes": ("size_histogram", size_chart),
    "latency": ("latency_histogram", latency_chart),
    "dlq": ("retry_dlq", dlq_chart),
}


def available_charts(run: ReportRun) -> list[str]:
    sections = set(run.report_rows.values_list("section", flat=True).distinct())
    return [name for name, (section, _) in CHARTS.items() if section in sections]
