"""Cells of the console's CSV downloads, made safe to open in a spreadsheet (OWASP's CSV injection).

A text cell starting with ``=``, ``+``, ``-`` or ``@`` is read by Excel, LibreOffice and Google
Sheets as a formula (``=HYPERLINK(...)``, ``=cmd|...``), and a leading tab or carriage return can
hide one; message keys, tags, bodies and topic names are written by whoever can send, so such a
cell gets a ``'`` in front, which the spreadsheet shows as text and does not display.

Only text is changed: an int or float is written by the csv module as digits with at most a
leading ``-``, never a formula, and prefixing it would make a numeric column (a negative lag
change, an offset of -1) text that no longer sums or sorts as numbers. A text cell that merely
looks like a number ("-5" as a message body) is still prefixed: its source is the sender's text.
The JSON exports are unchanged: they are the exact data.

No Django here: the analytics job writes its report CSVs with it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: text starting like a formula gets a leading ``'``; anything else
    (numbers, None) is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def safe_row(values: Iterable[Any]) -> list[Any]:
    return [safe_cell(value) for value in values]


def safe_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    return {column: safe_cell(value) for column, value in row.items()}
