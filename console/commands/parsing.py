"""Turning submitted fields (a form's POST, a management command's options) into a command's
parameters: a rejected form becomes the ``Invalid`` the boundary records and answers with a 400."""

from __future__ import annotations

import datetime

from core.boundary import Invalid


def form_errors_text(form) -> str:
    parts = []
    for name, errors in form.errors.items():
        label = "form" if name == "__all__" else name
        parts.append(f"{label}: {' '.join(str(e) for e in errors)}")
    return "; ".join(parts)


def submitted(data) -> dict:
    """What a record keeps of submitted fields: all but the CSRF token (last value of each)."""
    return {k: v for k, v in data.items() if k != "csrfmiddlewaretoken"}


def form_refusal(form, target: str, parameters: dict | None = None) -> Invalid:
    """A rejected form: recorded with its fields, refused with a 400 that names each field."""
    reason = form_errors_text(form)
    fields = submitted(form.data) if parameters is None else parameters
    return Invalid(reason, target=target, parameters=fields, shown=f"Invalid input: {reason}")


def parse_datetime_ms(text: str | None, field: str) -> int | None:
    """An ``<input type=datetime-local>`` value (UTC) or epoch milliseconds → epoch ms."""
    text = (text or "").strip()
    if not text:
        return None
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise Invalid(f"{field}: {text!r} is not a date and time (use YYYY-MM-DDTHH:MM)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def parse_float(text: str | None, field: str, minimum: float = 0, maximum: float = 100_000) -> float:
    text = (text or "").strip() or "0"
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"{field}: {text!r} is not a number") from None
    if not minimum <= value <= maximum:
        raise Invalid(f"{field} must be between {minimum:g} and {maximum:g}")
    return value
