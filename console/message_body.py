"""A message body as the console shows it (message detail, DLQ message): text when it decodes
as UTF-8, pretty JSON when that text parses, and a hex dump with offsets. A body over the display
limit is shown cut, and says so (an export always has it whole); its size is always the whole
body's."""

from __future__ import annotations

import json

BODY_DISPLAY_LIMIT = 64 * 1024


def body_views(body: bytes) -> dict:
    shown = body[:BODY_DISPLAY_LIMIT]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    pretty = None
    if text is not None and len(body) <= BODY_DISPLAY_LIMIT:  # a cut document would not parse
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = None
    hex_lines = [f"{i:08x}  {shown[i : i + 16].hex(' ')}" for i in range(0, len(shown), 16)]
    return {
        "text": text,
        "json": pretty,
        "hex": "\n".join(hex_lines),
        "size": len(body),
        "cut": len(body) > BODY_DISPLAY_LIMIT,
    }
