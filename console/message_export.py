"""W14: any message list as a CSV or JSON download (message views as ``describe_message`` makes them)."""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse

from core.csv_cells import safe_row

EXPORT_FORMATS = ("csv", "json")
COLUMNS = (
    "msg_id",
    "offset_msg_id",
    "topic",
    "broker_name",
    "queue_id",
    "queue_offset",
    "tags",
    "keys",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "store_host",
    "reconsume_times",
    "properties",
    "body_encoding",
    "body",
)


def _row(view: dict, columns: tuple[str, ...]) -> list:
    row = []
    for column in columns:
        value = view.get(column)
        if column == "properties":
            value = json.dumps(value or {}, sort_keys=True, ensure_ascii=False)
        row.append("" if value is None else value)
    return row


def export_response(
    views: list[dict], fmt: str, basename: str, extra_columns: tuple[str, ...] = ()
) -> HttpResponse:
    """A download of ``views``: CSV with one message per row (properties as JSON; cells that would
    run as a spreadsheet formula neutralised, see core.csv_cells), or a JSON array.
    ``extra_columns`` are what a page adds to each message (a dead letter's origin topic, a delayed
    message's due time), placed after its keys."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use csv or json")
    after_keys = COLUMNS.index("keys") + 1
    columns = (*COLUMNS[:after_keys], *extra_columns, *COLUMNS[after_keys:])
    safe = "".join(ch if ch.isalnum() or ch in "-_%" else "_" for ch in basename) or "messages"
    if fmt == "json":
        body = json.dumps([{c: v.get(c) for c in columns} for v in views], ensure_ascii=False, indent=1)
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        writer.writerows(safe_row(_row(v, columns)) for v in views)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{safe}.{fmt}"'
    return response
