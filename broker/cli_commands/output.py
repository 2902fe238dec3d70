"""Rendering of command results: aligned text tables, key/value blocks, JSON.

Commands never print; they return a ``CommandOutput`` and ``broker.cli`` decides between the
human form (RocketMQ's column names, aligned) and ``--json`` (one machine-readable object).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class CommandOutput:
    """What a subcommand produced: ``data`` for ``--json``, ``text`` for a terminal."""

    data: Any
    text: str


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns two spaces apart, widths fitted to the widest cell.

    RocketMQ prints fixed printf widths that overflow on long topic names; fitting the widths
    keeps columns aligned whatever the data, which is what an operator reading the table needs.
    """
    cells = [[format_value(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = [_join(headers, widths)]
    lines.extend(_join(row, widths) for row in cells)
    return "\n".join(lines)


def _join(values: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=False)).rstrip()


def format_value(value: Any) -> str:
    """One value as RocketMQ's Java tools print it (``true``/``false``, ``-`` for nothing)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_assignments(values: dict[str, Any]) -> str:
    """``key=value key=value`` — a config object on one line."""
    return " ".join(f"{key}={format_value(value)}" for key, value in values.items())


def render_pairs(pairs: Iterable[tuple[str, Any]], key_width: int = 20) -> str:
    """``label  value`` lines, as RocketMQ prints a single message or a config."""
    return "\n".join(f"{label:<{key_width}} {format_value(value)}" for label, value in pairs)


def format_millis(ms: int | None) -> str:
    """A millisecond timestamp as local ``yyyy-MM-dd HH:mm:ss,SSS`` (RocketMQ's human form)."""
    if not ms or ms <= 0:
        return "N/A"
    moment = datetime.datetime.fromtimestamp(ms / 1000.0)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def to_jsonable(value: Any) -> Any:
    """Dataclasses, bytes and containers into plain JSON types (bytes as UTF-8 text or hex)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.hex()
    return value


def dump_json(data: Any) -> str:
    return json.dumps(to_jsonable(data), ensure_ascii=False, sort_keys=False)
