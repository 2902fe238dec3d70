"""The header base: conversion between a header dataclass and a command's ``extFields``.

A header travels as the ``extFields`` string map of a ``RemotingCommand``. Attributes are
snake_case; on the wire each one is named as RocketMQ's ``CommandCustomHeader`` field
(``consumer_group`` ↔ ``consumerGroup``), and a few irregular names (``clientID``,
``MSG_REGION``) are spelled out with ``wire()``. A field without a default is required, as
RocketMQ's ``@CFNotNull``; ``from_ext_fields`` refuses a header lacking one, or carrying a
number that does not parse, with :class:`HeaderError` naming the field, so a processor can
answer with a clear error instead of failing halfway.

Where the broker accepts a request without a field that a sender must still give, the field says
what a decoded request assumes in its place with ``absent()``; ``nonempty()`` marks a required
text that may not be empty either (a broker's name and address at the name server).

Decoding runs for every request, sends and pulls included, so each class gets a decoder written
for its own fields (generated once, on first use): one dictionary look-up and at most one
conversion per field, as fast as reading the fields by hand.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.common.json_config_file import JAVA_LONG_MAX, JAVA_LONG_MIN

H = TypeVar("H", bound="CommandHeader")

_WIRE = "wire_name"
_ABSENT = "absent"
_NONEMPTY = "nonempty"
_MISSING: Any = dataclasses.MISSING


class HeaderError(ValueError):
    """A header that cannot be decoded: a required field missing or a number malformed (or
    wider than a Java long).

    ``field`` is the field's wire name and ``value`` its text (None or empty when missing), so a
    client reading a server's answer can word its own message (the text speaks of a request)."""

    def __init__(self, message: str, field: str | None = None, value: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


def wire(name: str, *, default: Any = _MISSING, absent: Any = _MISSING) -> Any:
    """A field whose wire name is not the camelCase of its attribute."""
    metadata = {_WIRE: name} if absent is _MISSING else {_WIRE: name, _ABSENT: absent}
    if default is _MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def absent(value: Any, *, default: Any = _MISSING) -> Any:
    """A field a sender always gives (or leaves to a ``default`` other than None), decoded as
    ``value`` when a request leaves it out; an empty text or number counts as left out (the
    broker's ``field or value``). A field whose default is None stays None when left out, so a
    header decodes back to what was encoded."""
    if default is _MISSING:
        return field(metadata={_ABSENT: value})
    return field(default=default, metadata={_ABSENT: value})


def nonempty() -> Any:
    """A required text field refused when empty as well as when missing."""
    return field(metadata={_NONEMPTY: True})


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    attr: str
    wire: str
    kind: type  # str, int or bool
    required: bool
    default: Any  # the dataclass default (or factory), _MISSING when required
    factory: bool
    absent: Any  # what a request without the field decodes to, _MISSING for the default
    nonempty: bool


def _kind_of(hint) -> type:
    # ``int | None`` → int: optional fields are typed as a union with None.
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base not in (str, int, bool):
        raise TypeError(f"unsupported header field type {hint!r}")
    return base


_SPECS: dict[type, tuple[_FieldSpec, ...]] = {}


def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        built = []
        for f in dataclasses.fields(cls):
            factory = f.default_factory is not _MISSING
            default = f.default_factory if factory else f.default
            built.append(
                _FieldSpec(
                    f.name,
                    f.metadata.get(_WIRE, _camel(f.name)),
                    _kind_of(hints[f.name]),
                    default is _MISSING,
                    default,
                    factory,
                    f.metadata.get(_ABSENT, _MISSING),
                    f.metadata.get(_NONEMPTY, False),
                )
            )
        specs = _SPECS[cls] = tuple(built)
    return specs


def _constant(i: int, value: Any, env: dict[str, Any]) -> str:
    """``value`` in the decoder's source: a literal when it has one, else a name bound in ``env``."""
    if value is None or type(value) in (str, int, bool):
        return repr(value)
    env[f"d{i}"] = value
    return f"d{i}"


def _decode_lines(i: int, spec: _FieldSpec, name: str, env: dict[str, Any]) -> list[str]:
    """Source lines setting ``self.<attr>`` from ``raw`` (the field's text, or None)."""
    out = f"self.{spec.attr}"
    lacks = f"the request header lacks the field {name!r}"
    lines = [f"    raw = get({name!r})"]
    if spec.absent is not _MISSING or not spec.required:
        if spec.absent is not _MISSING:
            fallback = _constant(i, spec.absent, env)
        elif spec.factory:
            env[f"d{i}"], fallback = spec.default, f"d{i}()"
        else:
            fallback = _constant(i, spec.default, env)
        # What counts as left out: ``None`` for text and booleans without an absent value (an
        # empty text is a text), an empty string as well for numbers and absent values.
        left_out = (
            "raw is None"
            if spec.kind is bool or (spec.kind is str and spec.absent is _MISSING)
            else "not raw"
        )
        lines.append(f"    if {left_out}:")
        lines.append(f"        {out} = {fallback}")
        lines.append("    else:")
        indent = "        "
    else:
        lines.append(f"    if {'not raw' if spec.kind is int or spec.nonempty else 'raw is None'}:")
        lines.append(f"        raise HeaderError({lacks!r}, {name!r}, raw)")
        indent = "    "
    if spec.kind is str:
        lines.append(f"{indent}{out} = raw")
    elif spec.kind is bool:
        # Java's Boolean.parseBoolean: anything but a case-insensitive "true" is false (the
        # usual spellings without a call).
        lines.append(f'{indent}{out} = raw == "true" or (raw != "false" and raw.lower() == "true")')
    else:
        bad = f"the request header field {name!r}="
        error = f"HeaderError({bad!r} + repr(raw) + ' is not a number', {name!r}, raw)"
        # Java reads every number field as an Integer or a Long: anything wider no peer can hold,
        # and kept it would fail later, in a table's write or a reply's encoding.
        too_big = f"HeaderError({bad!r} + repr(raw) + ' does not fit a Java long', {name!r}, raw)"
        lines += [
            f"{indent}try:",
            f"{indent}    {out} = int(raw)",
            f"{indent}except ValueError:",
            f"{indent}    raise {error} from None",
            f"{indent}if not {JAVA_LONG_MIN} <= {out} <= {JAVA_LONG_MAX}:",
            f"{indent}    raise {too_big}",
        ]
    return lines


def make_decoder(
    cls: type[H], renamed: Mapping[str, str] | None = None
) -> Callable[[Mapping[str, str] | None], H]:
    """A function decoding ``extFields`` into a ``cls``; ``renamed`` maps wire names to the ones
    to read instead (the one-letter names of SEND_MESSAGE_V2)."""
    # The instance is made without calling ``__init__`` (it would only set the same attributes
    # again); a class that does more on construction is built through it.
    direct = not hasattr(cls, "__post_init__")
    env: dict[str, Any] = {"HeaderError": HeaderError, "cls": cls, "_EMPTY": {}, "new": object.__new__}
    lines = ["def decode(ext_fields):", "    get = (ext_fields or _EMPTY).get", "    self = new(cls)"]
    specs = _specs(cls)
    for i, spec in enumerate(specs):
        name = renamed.get(spec.wire, spec.wire) if renamed else spec.wire
        lines += _decode_lines(i, spec, name, env)
    if direct:
        lines.append("    return self")
    else:
        args = ", ".join(f"self.{spec.attr}" for spec in specs)
        lines.append(f"    return cls({args})")
    # The source is built above from the class's own fields, nothing from a request.
    exec("\n".join(lines), env)
    return env["decode"]


_DECODERS: dict[type, Callable[[Mapping[str, str] | None], Any]] = {}


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# How a field of each kind is written when its value has that kind (anything else: _format).
_WRITE = {str: "{v}", int: "str({v})", bool: '"true" if {v} else "false"'}


def _text(spec: _FieldSpec, v: str) -> str:
    """Source writing the value ``v`` of ``spec``'s field as text."""
    return f"({_WRITE[spec.kind].format(v=v)} if type({v}) is {spec.kind.__name__} else _format({v}))"


def make_encoder(cls: type) -> Callable[[Any], dict[str, str]]:
    """A function writing a ``cls`` as ``extFields``: every field that is not None, as text, in
    the class's order (senders build one header per request, so this is generated as the decoder
    is). The leading fields without a default are never None: one dict display writes them."""
    specs = _specs(cls)
    leading = 0
    while leading < len(specs) and specs[leading].required:
        leading += 1
    display = ", ".join(f"{spec.wire!r}: {_text(spec, f'self.{spec.attr}')}" for spec in specs[:leading])
    lines = ["def encode(self):", f"    out = {{{display}}}"]
    for spec in specs[leading:]:
        if spec.required:
            lines.append(f"    out[{spec.wire!r}] = {_text(spec, f'self.{spec.attr}')}")
        else:
            lines += [
                f"    v = self.{spec.attr}",
                "    if v is not None:",
                f"        out[{spec.wire!r}] = {_text(spec, 'v')}",
            ]
    lines.append("    return out")
    env: dict[str, Any] = {"_format": _format}
    exec("\n".join(lines), env)  # the source is built from the class's own fields
    return env["encode"]


@typing.dataclass_transform(field_specifiers=(field, wire, absent, nonempty))
def header(cls: type[H]) -> type[H]:
    """A header class: a slotted dataclass whose fields may be declared with ``wire``, ``absent``
    or ``nonempty`` (declared so, type checkers know which of those fields have defaults)."""
    made = dataclass(slots=True)(cls)

    def to_ext_fields(self) -> dict[str, str]:
        # The first call writes the class's encoder and puts it in this method's place, so the
        # send and pull answers (one per message) call it directly, without a look-up.
        encode = make_encoder(made)
        made.to_ext_fields = encode  # type: ignore[method-assign, assignment]
        return encode(self)

    made.to_ext_fields = to_ext_fields  # type: ignore[method-assign]
    return made


class CommandHeader:
    """Base of every header: conversion to and from ``extFields``."""

    __slots__ = ()

    def to_ext_fields(self) -> dict[str, str]:
        """The header as ``extFields`` (each ``@header`` class replaces this with its encoder)."""
        return make_encoder(type(self))(self)

    @classmethod
    def from_ext_fields(cls: type[H], ext_fields: Mapping[str, str] | None) -> H:
        decode = _DECODERS.get(cls)
        if decode is None:
            decode = _DECODERS[cls] = make_decoder(cls)
        return decode(ext_fields)

    @classmethod
    def wire_names(cls) -> list[str]:
        return [spec.wire for spec in _specs(cls)]
