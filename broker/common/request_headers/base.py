"""The header base: conversion between a header dataclass and a command's ``extFields``.

A header travels as the ``extFields`` string map of a ``RemotingCommand``. Attributes are
snake_case; on the wire each one is named as RocketMQ's ``CommandCustomHeader`` field
(``consumer_group`` ↔ ``consumerGroup``), and a few irregular names (``clientID``,
``MSG_REGION``) are spelled out with ``wire()``. A field without a default is required, as
RocketMQ's ``@CFNotNull``; ``from_ext_fields`` refuses a header lacking one, or carrying a
number that does not parse, with :class:`HeaderError` naming the field, so a processor can
answer with a clear error instead of failing halfway.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import TypeVar

H = TypeVar("H", bound="CommandHeader")

_WIRE = "wire_name"


class HeaderError(ValueError):
    """A header that cannot be decoded: a required field missing or a number malformed."""


def wire(name: str, default=dataclasses.MISSING):
    """A field whose wire name is not the camelCase of its attribute."""
    if default is dataclasses.MISSING:
        return field(metadata={_WIRE: name})
    return field(default=default, metadata={_WIRE: name})


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    attr: str
    wire: str
    kind: type  # str, int or bool
    required: bool


def _kind_of(hint) -> type:
    # ``int | None`` → int: optional fields are typed as a union with None.
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base not in (str, int, bool):
        raise TypeError(f"unsupported header field type {hint!r}")
    return base


@functools.cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        name = f.metadata.get(_WIRE, _camel(f.name))
        specs.append(_FieldSpec(f.name, name, _kind_of(hints[f.name]), required))
    return tuple(specs)


def _parse(spec: _FieldSpec, raw: str):
    if spec.kind is str:
        return raw
    if spec.kind is bool:
        # Java's Boolean.parseBoolean: anything but a case-insensitive "true" is false.
        return raw.strip().lower() == "true"
    try:
        return int(raw.strip())
    except ValueError:
        raise HeaderError(f"the request header field {spec.wire!r}={raw!r} is not a number") from None


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class CommandHeader:
    """Base of every header: conversion to and from ``extFields``."""

    __slots__ = ()

    def to_ext_fields(self) -> dict[str, str]:
        out = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.wire] = _format(value)
        return out

    @classmethod
    def from_ext_fields(cls: type[H], ext_fields: dict[str, str] | None) -> H:
        ext_fields = ext_fields or {}
        values = {}
        for spec in _specs(cls):
            raw = ext_fields.get(spec.wire)
            if raw is None or (raw == "" and spec.kind is not str):
                if spec.required:
                    raise HeaderError(f"the request header lacks the field {spec.wire!r}")
                continue
            values[spec.attr] = _parse(spec, raw)
        return cls(**values)

    @classmethod
    def wire_names(cls) -> list[str]:
        return [spec.wire for spec in _specs(cls)]
