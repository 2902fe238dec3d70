"""The broker's use of the ``broker.conf`` key table (``broker/common/broker_config_keys.py``):
checking ``broker.conf`` at start and UPDATE_BROKER_CONFIG requests, and the keys behind the
GET_BROKER_CONFIG answer.

The broker's ``KEYS`` is the common table with the store's check of ``archiveUri`` added (the
table itself lives in ``broker/common`` so the console can show it without importing the store).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.common.broker_config_keys import (
    BROKER,
    FIXED,
    STORE,
    Apply,
    ArchiveUri,
    ConfigKey,
    ConfigValueError,
    FixedConfigKeyError,
    UnknownConfigKeyError,
)
from broker.common.broker_config_keys import KEYS as COMMON_KEYS
from broker.store.archive import SegmentArchiver

__all__ = [
    "BROKER",
    "KEYS",
    "STORE",
    "Apply",
    "ConfigKey",
    "ConfigValueError",
    "FixedConfigKeyError",
    "UnknownConfigKeyError",
    "describe",
    "key_of",
    "parse_known",
    "validate_update",
]

KEYS: dict[str, ConfigKey] = {
    **COMMON_KEYS,
    # SegmentArchiver raises ValueError for a URI it cannot archive to.
    "archiveUri": dataclasses.replace(COMMON_KEYS["archiveUri"], kind=ArchiveUri(check=SegmentArchiver)),
}


def key_of(name: str) -> ConfigKey:
    key = KEYS.get(name)
    if key is None:
        raise UnknownConfigKeyError([name])
    return key


def parse_known(raw: dict[str, str]) -> tuple[dict[ConfigKey, Any], list[str]]:
    """Typed values of the known keys in ``raw`` and the names of the unknown ones.
    Raises ``ConfigValueError`` (naming key and value) at the first bad value."""
    values, unknown = {}, []
    for name, text in raw.items():
        key = KEYS.get(name)
        if key is None:
            unknown.append(name)
        else:
            values[key] = key.parse(text)
    return values, unknown


def validate_update(updates: dict[str, str]) -> dict[ConfigKey, Any]:
    """Check an UPDATE_BROKER_CONFIG request before anything is applied or written: every key
    known and changeable at run time, every value of its type and range."""
    unknown = [name for name in updates if name not in KEYS]
    if unknown:
        raise UnknownConfigKeyError(unknown)
    fixed = sorted(name for name in updates if KEYS[name].apply is FIXED)
    if fixed:
        raise FixedConfigKeyError(
            f"cannot change {', '.join(fixed)} at run time; edit broker.conf and restart"
        )
    return {KEYS[name]: KEYS[name].parse(text) for name, text in updates.items()}


def describe(key: ConfigKey) -> str:
    return key.kind.describe()
