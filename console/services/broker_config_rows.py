"""The broker-config page's rows: each key's running value beside what the broker's key table
(``broker.common.broker_config_keys``) says of it (type and range, whether a change applies at
once or after a restart) and the value waiting for a restart, if any."""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.broker_config_keys import KEYS, Apply

_APPLIES = {
    Apply.LIVE: "at once",
    Apply.RESTART: "after restart",
    Apply.FIXED: "broker.conf only",
}


@dataclass(frozen=True)
class ConfigRow:
    key: str
    value: str
    applies: str  # "at once", "after restart", "broker.conf only"; "" for a key this console does not know
    accepts: str  # what values the key takes
    pending: str | None  # accepted, waiting for the broker's restart
    help: str


def config_rows(values: dict[str, str], pending: dict[str, str]) -> list[ConfigRow]:
    rows = []
    for name in sorted(set(values) | set(pending)):
        key = KEYS.get(name)
        rows.append(
            ConfigRow(
                name,
                values.get(name, ""),
                _APPLIES[key.apply] if key else "",
                key.kind.describe() if key else "",
                pending.get(name),
                key.help if key else "",
            )
        )
    return rows


def updatable_keys() -> list[tuple[str, str]]:
    """Keys the form offers (those a running broker accepts), with how each applies."""
    return [(name, _APPLIES[key.apply]) for name, key in sorted(KEYS.items()) if key.apply is not Apply.FIXED]
