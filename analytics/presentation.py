"""Report rows as people read them on the run's page (the CSV and Parquet downloads keep the
raw values): hours as UTC dates, rates as percentages, floats rounded, columns named in words.

Formats follow the rest of the console (``core.formatting``: dates in UTC, ratios with
one decimal and a space before %, figures to two decimals as ``floatformat:2``).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

from core.formatting import percent

from .models import REPORT_LABELS

SECTION_TITLES = {
    "inputs": "What was read",
    "throughput": "Throughput per topic per hour",
    "size": "Message body size (bytes)",
    "size_histogram": "Message body sizes",
    "latency": "Store latency (ms, store time - born time)",
    "latency_histogram": "Store latencies",
    "retry_dlq": "Retries and dead letters per consumer group",
    "delay_levels": "Delay-level usage",
    "transactions": "Transaction outcomes",
    "top_keys": "Top keys",
    "top_tags": "Top tags",
}
COLUMN_LABELS = {
    "hour_start_ms": "Hour (UTC)",
    "le": "Up to",
    "store_bytes": "Stored bytes",
    "source_topics": "Source topics",
}
MISSING = "—"


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool


def column_label(name: str) -> str:
    return COLUMN_LABELS.get(name) or name.replace("_", " ").capitalize()


def format_cell(column: str, value) -> Cell:
    if column.endswith("_ms") and isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
        return Cell(moment.strftime("%Y-%m-%d %H:%M"), False)
    if column == "le":  # a histogram bucket's upper bound; the last bucket has none
        return Cell("more" if value is None else f"≤ {value}", True)
    if value is None:
        return Cell(MISSING, False)
    if column.endswith("_rate"):
        return Cell(percent(value), True)
    if isinstance(value, bool):
        return Cell("yes" if value else "no", False)
    if isinstance(value, int):
        return Cell(str(value), True)
    if isinstance(value, float):
        return Cell(str(int(value)) if value.is_integer() else f"{value:.2f}", True)
    return Cell(str(value), False)


def section_table(rows: list[dict]) -> tuple[list[tuple[str, bool]], list[list[Cell]]]:
    """Header (label, numeric) and body cells of one section's rows."""
    columns = list(rows[0]) if rows else []
    body = [[format_cell(column, row.get(column)) for column in columns] for row in rows]
    numeric = [any(line[i].numeric for line in body) for i in range(len(columns))]
    return [(column_label(c), numeric[i]) for i, c in enumerate(columns)], body


def schedule_summary(kwargs_json: str) -> str:
    """What a beat schedule's run computes, in words (its task arguments are JSON)."""
    try:
        kwargs = json.loads(kwargs_json or "{}")
    except ValueError:
        return "unreadable arguments"
    if not isinstance(kwargs, dict):
        return "unreadable arguments"
    report = REPORT_LABELS.get(kwargs.get("report", "all"), str(kwargs.get("report")))
    topics = kwargs.get("topics") or []
    window = kwargs.get("window_hours") or 0
    parts = [
        report,
        f"topics {', '.join(map(str, topics))}" if topics else "every topic",
        f"last {window} h" if window else "everything archived",
    ]
    if kwargs.get("input_uri"):
        parts.append(f"from {kwargs['input_uri']}")
    return " · ".join(parts)
