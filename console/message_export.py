"""W14: any message list as a CSV or JSON download (message views as ``describe_message`` makes them)."""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse

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


def _row(view: dict) -> list:
    row = []
    for column in COLUMNS:
        value = view.get(column)
        if column == "properties":
            value = json.dumps(value or {}, sort_keys=True, ensure_ascii=False)
        row.append("" if value is None else value)
    return row


def export_response(views: list[dict], fmt: str, basename: str) -> HttpResponse:
    """A download of ``views``: CSV with one message per row (properties as JSON), or a JSON array."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use csv or json")
    safe = "".join(ch if ch.isalnum() or ch in "-_%" else "_" for ch in basename) or "messages"
    if fmt == "json":
        body = json.dumps([{c: v.get(c) for c in COLUMNS} for v in views], ensure_ascii=False, indent=1)
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(COLUMNS)
        writer.writerows(_row(v) for v in views)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{safe}.{fmt}"'
    return response
