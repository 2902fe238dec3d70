"""Charts of a run, drawn server-side as PNG with matplotlib (no browser-side assets needed)."""

from __future__ import annotations

import io
from collections import defaultdict
from datetime import UTC, datetime

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from .models import ReportRun
from .spark.catalog import HOUR_MS

MAX_TOPIC_LINES = 8
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per topic line (MAX_TOPIC_LINES)
LINE_STYLES = ("-", "--", "-.", ":")
MAX_HOUR_TICKS = 12


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def throughput_chart(run: ReportRun) -> bytes:
    return _png(throughput_figure(run.rows("throughput")))


def throughput_figure(rows: list[dict]):
    """Messages per hour of the busiest user topics (``throughput`` rows of kind normal).

    The x axis spans the hours of the data (half an hour either side), not matplotlib's default
    of years around a single point; each topic has its own hollow marker and line style, the later
    ones smaller, so series with equal counts show as nested outlines instead of hiding each other."""
    series: dict[str, dict[int, int]] = defaultdict(dict)
    for row in rows:
        if row["kind"] == "normal":
            series[row["topic"]][row["hour_start_ms"]] = row["messages"]
    busiest = sorted(series, key=lambda t: (-sum(series[t].values()), t))[:MAX_TOPIC_LINES]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for i, topic in enumerate(busiest):
        hours = sorted(series[topic])
        ax.plot(mdates.date2num([_utc(h) for h in hours]), [series[topic][h] for h in hours],
                marker=MARKERS[i], markersize=16 - 1.5 * i, markerfacecolor="none", markeredgewidth=2,
                linestyle=LINE_STYLES[i % len(LINE_STYLES)],
                label=f"{topic} ({sum(series[topic].values())})")  # fmt: skip
    ax.set_title("Messages per hour (user topics)")
    ax.set_ylabel("messages")
    highest = max((n for topic in busiest for n in series[topic].values()), default=0)
    ax.set_ylim(0, highest * 1.2 or 1)  # room above the top markers
    if busiest:
        ax.legend(fontsize="small")
        _hour_axis(ax, min(min(series[t]) for t in busiest), max(max(series[t]) for t in busiest))
    fig.autofmt_xdate()
    return fig


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _hour_axis(ax, first_ms: int, last_ms: int) -> None:
    """An x axis from half an hour before the first hour to half an hour after the last, ticked
    every hour (every few hours over a long span: at most ``MAX_HOUR_TICKS`` ticks)."""
    half = HOUR_MS // 2
    ax.xaxis_date(tz=UTC)  # the lines were drawn from date numbers
    ax.set_xlim(_utc(first_ms - half), _utc(last_ms + half))
    hours = (last_ms - first_ms) // HOUR_MS + 1
    step = -(-hours // MAX_HOUR_TICKS)  # ceiling
    ax.xaxis.set_major_locator(mdates.HourLocator(interval=step, tz=UTC))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d %H:%M", tz=UTC))
    ax.set_xlabel("hour (UTC)")


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
