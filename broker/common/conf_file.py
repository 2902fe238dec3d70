"""The one loader of RocketMQ-style ``key=value`` files (``broker.conf``, ``namesrv.conf``).

Java ``Properties`` syntax as operators write it: ``#`` or ``!`` comments, blank lines, ``=`` or
``:`` separators, surrounding whitespace ignored. Values stay strings; typed readers convert
them with errors that name the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from broker.common.atomic_file import replace_atomically


class ConfError(ValueError):
    """A setting that cannot be used, with the file and key named."""


def parse_properties(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        separators = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not separators:
            values[line] = ""
            continue
        cut = min(separators)
        values[line[:cut].strip()] = line[cut + 1 :].strip()
    return values


def format_properties(values: Mapping[str, object]) -> str:
    """``key=value`` lines, as Java's properties text (UPDATE/GET_BROKER_CONFIG bodies)."""
    return "".join(f"{key}={value}\n" for key, value in values.items())


def load_conf(path: str | Path | None, overrides: Mapping[str, object] | None = None) -> dict[str, str]:
    """Settings from ``path`` (when given) with ``overrides`` (from the command line) on top: each
    written as text, those that are None (an option not given) left out."""
    values: dict[str, str] = {}
    if path:
        try:
            values = parse_properties(Path(path).read_text())
        except OSError as exc:
            raise ConfError(f"cannot read the configuration file {path}: {exc.strerror}") from None
    values.update({k: str(v) for k, v in (overrides or {}).items() if v is not None})
    return values


def get_int(values: Mapping[str, str], key: str, default: int) -> int:
    raw = values.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfError(f"{key}={raw!r} is not a whole number") from None


def get_bool(values: Mapping[str, str], key: str, default: bool) -> bool:
    raw = values.get(key)
    if raw is None or raw == "":
        return default
    if raw.lower() not in ("true", "false"):
        raise ConfError(f"{key}={raw!r} must be true or false")
    return raw.lower() == "true"


def read_keys(
    conf: Mapping[str, str], *keys: tuple[str, Callable[[Mapping[str, str], str, Any], Any], Any]
) -> list[Any]:
    """Each ``(key, reader, default)`` of ``keys`` read from ``conf`` in order (``get_int``,
    ``get_bool``): the fields of a settings class, e.g. ``cls(*read_keys(conf, ...))``."""
    return [read(conf, key, default) for key, read, default in keys]


def parse_hours(text: str) -> set[int]:
    """``deleteWhen``: hours of the day, ``04`` or ``04;16`` (commas too); a ValueError saying
    what is expected when there is none or one is not an hour 0-23."""
    hours = [h.strip() for h in text.replace(",", ";").split(";") if h.strip()]
    if not hours or any(not h.isdigit() or not 0 <= int(h) <= 23 for h in hours):
        raise ValueError("must be hours 0-23 separated by ; (e.g. 04 or 04;16)")
    return {int(h) for h in hours}


def get_list(values: Mapping[str, str], key: str) -> list[str]:
    """A ``;``-separated list (namesrvAddr)."""
    return [item.strip() for item in values.get(key, "").split(";") if item.strip()]


def write_properties(path: str | Path, updates: dict[str, str]) -> None:
    """Rewrite ``path`` with ``updates`` applied, keeping comments and other lines as they were."""
    path = Path(path)
    lines = path.read_text().splitlines() if path.exists() else []
    pending = dict(updates)
    out = []
    for line in lines:
        stripped = line.strip()
        key = next(iter(parse_properties(stripped)), None) if stripped and stripped[0] not in "#!" else None
        if key in pending:
            out.append(f"{key}={pending.pop(key)}")
        else:
            out.append(line)
    out.extend(f"{key}={value}" for key, value in pending.items())
    replace_atomically(path, ("\n".join(out) + "\n").encode())
