"""Epoch milliseconds, as the brokers give times, to the aware datetimes pages show."""

from __future__ import annotations

import datetime


def ms_to_datetime(ms: int | None) -> datetime.datetime | None:
    if not ms:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
