"""``RemotingCommand``: one request or response of RocketMQ's remoting protocol."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from broker.common.codes import LanguageCode, ResponseCode
from broker.common.request_headers.base import CommandHeader

RPC_TYPE_RESPONSE = 0x1
RPC_ONEWAY = 0x2
PROTOCOL_VERSION = 399  # RocketMQ 4.9.x clients send a version of this order

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

_opaque_counter = itertools.count(1)
_LANGUAGE = LanguageCode.PYTHON  # what this side writes as its language


@dataclass(slots=True)
class RemotingCommand:
    code: int
    language: int = _LANGUAGE
    version: int = PROTOCOL_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = SERIALIZE_JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def field(self, name: str, default: str | None = None) -> str | None:
        return self.ext_fields.get(name, default)

    def int_field(self, name: str, default: int | None = None) -> int:
        """An integer header field; a missing or malformed one raises ValueError with its name."""
        raw = self.ext_fields.get(name)
        if raw is None or raw == "":
            if default is None:
                raise ValueError(f"the request header lacks the field {name!r}")
            return default
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"the request header field {name!r}={raw!r} is not a number") from None

    def bool_field(self, name: str, default: bool = False) -> bool:
        raw = self.ext_fields.get(name)
        return default if raw is None else raw.lower() == "true"


_is_str = str.__instancecheck__


def _stringify(fields: dict | None) -> dict[str, str]:
    if not fields:
        return {}
    if all(map(_is_str, fields.values())):  # already text (hot responses build them so): a copy
        return dict(fields)
    out = {}
    for key, value in fields.items():
        kind = type(value)
        if kind is str:  # the common case first, without a call
            out[key] = value
        elif kind is bool:
            out[key] = "true" if value else "false"
        elif value is not None:
            out[key] = str(value)
    return out


def create_request(
    code: int, ext_fields: dict | CommandHeader | None = None, body: bytes = b"", oneway: bool = False
) -> RemotingCommand:
    """A request with ``ext_fields`` (values made text) or a typed header's fields."""
    # A header's fields are already text, in a dict of their own: no check, no copy.
    fields = ext_fields.to_ext_fields() if isinstance(ext_fields, CommandHeader) else _stringify(ext_fields)
    return RemotingCommand(
        code=int(code),
        opaque=next(_opaque_counter),
        flag=RPC_ONEWAY if oneway else 0,
        ext_fields=fields,
        body=body,
    )


def response_to(
    request: RemotingCommand,
    code: int = ResponseCode.SUCCESS,
    remark: str | None = None,
    ext_fields: CommandHeader | dict | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """A response matching ``request`` (same opaque and serialisation) with a typed header's
    fields, or with ``ext_fields`` as they are (values made text) where the broker relays a
    header it did not write (a client's answer to a forwarded request)."""
    fields = ext_fields.to_ext_fields() if isinstance(ext_fields, CommandHeader) else _stringify(ext_fields)
    # Positional, in the field order: a keyword call costs more, once per answer.
    return RemotingCommand(
        int(code), _LANGUAGE, PROTOCOL_VERSION, request.opaque, RPC_TYPE_RESPONSE, remark, fields, body,
        request.serialize_type,
    )  # fmt: skip
