"""Refuse request parameters no part of the console can hold: a NUL character.

No topic, group, key, filter or user name has one, and PostgreSQL refuses any string holding one
with an exception (a 500) — views that filter or store raw parameters (the audit filter, saved tail
filters) would pass it on. Forms already refuse it field by field; this covers every parameter
once, before any view runs.
"""

from __future__ import annotations

from core.errors import CORRECT_AND_RETRY, error_page


class RefuseNulCharacters:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        sources = [request.GET]
        if request.method == "POST" and request.content_type in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ):
            sources.append(request.POST)
        for params in sources:
            for key, values in params.lists():
                if "\x00" in key or any("\x00" in value for value in values):
                    reason = f"The parameter {key.replace(chr(0), '?')!r} holds a NUL character."
                    return error_page(request, 400, "Bad request", reason, CORRECT_AND_RETRY)
        return self.get_response(request)
