"""Frames and headers on the wire.

    frame  = total length (4, excludes itself) | header length (4) | header | body
    header length: high byte = serialisation (0 JSON, 1 ROCKETMQ), low 3 bytes = length

The ROCKETMQ binary header is: code 2 | language 1 | version 2 | opaque 4 | flag 4
| remark length 4 + remark | extFields length 4 + (key length 2 + key, value length 4 + value)*.
"""

from __future__ import annotations

import struct

import orjson

from broker.common.codes import LanguageCode
from broker.common.connection_limits import DEFAULT_FRAME_MAX_LENGTH

from .command import SERIALIZE_JSON, SERIALIZE_ROCKETMQ, RemotingCommand
from .errors import FrameError

LENGTHS = struct.Struct(">ii")
BINARY_FIXED = struct.Struct(">hbhii")
INT = struct.Struct(">i")
SHORT = struct.Struct(">h")
LENGTH_FIELD = 4
JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1
_LANGUAGE_NAMES = {code.name: int(code) for code in LanguageCode}
_LANGUAGE_OF = {int(code): code.name for code in LanguageCode}


# -- headers ---------------------------------------------------------------------------------
def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == SERIALIZE_ROCKETMQ:
        return _encode_binary(cmd)
    header = {
        "code": cmd.code,
        "language": _LANGUAGE_OF.get(cmd.language, "OTHER"),
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    return orjson.dumps(header)


def _encode_binary(cmd: RemotingCommand) -> bytes:
    remark = (cmd.remark or "").encode()
    fields = b"".join(
        SHORT.pack(len(k := key.encode())) + k + INT.pack(len(v := value.encode())) + v
        for key, value in cmd.ext_fields.items()
    )
    return b"".join((
        BINARY_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag),
        INT.pack(len(remark)), remark, INT.pack(len(fields)), fields,
    ))  # fmt: skip


def decode_header(raw: bytes | bytearray, serialize_type: int) -> RemotingCommand:
    if serialize_type == SERIALIZE_JSON:
        return _decode_json(raw)
    if serialize_type == SERIALIZE_ROCKETMQ:
        return _decode_binary(raw)
    raise FrameError(f"unknown serialisation type {serialize_type}")


def _decode_json(raw: bytes | bytearray) -> RemotingCommand:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"the header is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "code" not in data:
        raise FrameError("the JSON header has no request code")
    get = data.get
    # The opaque goes back in the answer: it must be a Java int (a binary header carries 4
    # bytes). Without a usable one no answer can be addressed: the frame is refused whole.
    opaque = get("opaque", 0)
    if type(opaque) is not int or not JAVA_INT_MIN <= opaque <= JAVA_INT_MAX:
        opaque = _header_int(opaque, "opaque", None)
    try:
        ext = get("extFields") or {}
        remark = get("remark")
        # Positional, in RemotingCommand's field order: this runs for every frame.
        return RemotingCommand(
            _as_int(data["code"]),
            _language(get("language", "JAVA")),
            _as_int(get("version", 0)),
            opaque,
            _as_int(get("flag", 0)),
            remark if remark is None or type(remark) is str else str(remark),
            ext if all(map(_is_str, ext.values())) else _ext_as_text(ext),
            b"",
            SERIALIZE_JSON,
        )
    except (TypeError, ValueError, AttributeError):  # (the usual frame never gets here)
        raise HeaderValueError(opaque, _what_is_wrong(data)) from None


def _as_int(value) -> int:
    return value if type(value) is int else int(value)  # Java peers may send numbers as text


class HeaderValueError(FrameError):
    """A whole frame whose header is JSON but one of its values is unusable (a flag that is no
    number, an extFields that is no object). With ``opaque`` (the request's own, readable) the
    request is answered with a refusal naming the value; without, the frame cannot be answered
    (nothing says which request it was) and the connection is closed, as RocketMQ closes a
    connection whose frame it cannot decode."""

    def __init__(self, opaque: int | None, reason: str) -> None:
        super().__init__(reason)
        self.opaque, self.reason = opaque, reason


def _what_is_wrong(data: dict) -> str:
    """Why a JSON header could not be read, naming the value (a refusal's remark)."""
    if not isinstance(data.get("extFields") or {}, dict):
        return "the header's extFields is not an object"
    for name in ("code", "version", "flag"):
        value = data.get(name, 0)
        try:
            _as_int(value)
        except (TypeError, ValueError):
            return f"the header's {name} {_shown(value)} is not a number"
    return "the header has a value of the wrong type"


def _header_int(value, name: str, opaque: int | None) -> int:
    """A header number that must fit a Java int; Java peers may send numbers as text."""
    if type(value) is not int:
        try:
            value = int(value)  # text digits, or a float such as 3.0
        except (TypeError, ValueError, OverflowError):
            raise HeaderValueError(opaque, f"the header's {name} {_shown(value)} is not a number") from None
    if not JAVA_INT_MIN <= value <= JAVA_INT_MAX:
        raise HeaderValueError(opaque, f"the header's {name} {_shown(value)} is out of the 32-bit range")
    return value


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_is_str = str.__instancecheck__  # JSON object keys are always strings; values need a look


def _ext_as_text(ext: dict) -> dict[str, str]:
    """Java peers coerce header values to strings: numbers and booleans arrive either way."""
    return {k: v if type(v) is str else _as_text(v) for k, v in ext.items() if v is not None}


def _as_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _language(value) -> int:
    code = _LANGUAGE_NAMES.get(value) if type(value) is str else None
    if code is not None:
        return code
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        return _LANGUAGE_NAMES.get(value.upper(), int(LanguageCode.OTHER))
    return int(LanguageCode.OTHER)


def _decode_binary(raw: bytes | bytearray) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = BINARY_FIXED.unpack_from(raw, 0)
        pos = BINARY_FIXED.size
        remark_len = INT.unpack_from(raw, pos)[0]
        pos += 4
        remark = _text(raw, pos, remark_len) if remark_len > 0 else None
        pos += max(remark_len, 0)
        fields_len = INT.unpack_from(raw, pos)[0]
        pos += 4
        fields = _binary_fields(raw, pos, fields_len) if fields_len > 0 else {}
    except struct.error as exc:
        raise FrameError(f"truncated binary header: {exc}") from None
    return RemotingCommand(code, language, version, opaque, flag, remark, fields, b"", SERIALIZE_ROCKETMQ)


def _text(raw: bytes | bytearray, pos: int, length: int) -> str:
    if pos + length > len(raw) or length < 0:
        raise FrameError("a binary header string overruns the header")
    try:
        return raw[pos : pos + length].decode()
    except UnicodeDecodeError:
        raise FrameError("a binary header string is not UTF-8") from None


def _binary_fields(raw: bytes | bytearray, pos: int, length: int) -> dict[str, str]:
    end = pos + length
    if end > len(raw):
        raise FrameError("extFields overrun the binary header")
    fields = {}
    while pos < end:
        key_len = SHORT.unpack_from(raw, pos)[0]
        key = _text(raw, pos + 2, key_len)
        pos += 2 + key_len
        value_len = INT.unpack_from(raw, pos)[0]
        fields[key] = _text(raw, pos + 4, value_len)
        pos += 4 + value_len
    return fields


# -- frames ----------------------------------------------------------------------------------
def encode_frame(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    body = cmd.body
    header_len = len(header)
    if not body:
        return LENGTHS.pack(4 + header_len, (cmd.serialize_type << 24) | header_len) + header
    return b"".join((LENGTHS.pack(4 + header_len + len(body), (cmd.serialize_type << 24) | header_len),
                     header, body))  # fmt: skip


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get complete commands back.

    A frame's declared length is checked as soon as its first 8 bytes are in, before any more of
    it is kept: a frame longer than ``max_frame_length`` (counting its 4-byte length field, as
    RocketMQ's frameMaxLength does) raises FrameError, and so does any frame that cannot be
    decoded. A request whose header is readable but holds an unusable value (see
    HeaderValueError) is not returned; ``refused`` collects (opaque, serialisation, reason) for
    each, for the connection to answer.
    """

    def __init__(self, max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._max_total = max_frame_length - LENGTH_FIELD  # the largest length a frame may declare
        self._buffer = bytearray()
        self.refused: list[tuple[int, int, str]] = []

    @property
    def pending_bytes(self) -> int:
        """Bytes of a frame not complete yet, kept until the rest arrives."""
        return len(self._buffer)

    def discard(self) -> None:
        """Forget the unfinished frame (its connection is being closed): its memory is freed now."""
        self._buffer = bytearray()

    def _bad_length(self, total: int) -> str:
        if total < 4:
            return f"frame length {total} is under 4"
        return (
            f"frame of {total + LENGTH_FIELD} bytes (with its length field) is over the frame limit "
            f"{self.max_frame_length} (frameMaxLength)"
        )

    def feed(self, data: bytes) -> list[RemotingCommand]:
        buffer = self._buffer
        source: bytes | bytearray
        if buffer:
            buffer += data
            source = buffer
        else:  # nothing left over (the usual case): read the frames straight from ``data``
            source = data
        commands = []
        start, available = 0, len(source)
        try:
            while available - start >= 8:
                total, marked = LENGTHS.unpack_from(source, start)
                if total < 4 or total > self._max_total:
                    raise FrameError(self._bad_length(total))
                serialize_type, header_len = (marked >> 24) & 0xFF, marked & 0xFFFFFF
                if header_len > total - 4:
                    raise FrameError(f"header length {header_len} exceeds the frame length {total}")
                end = start + 4 + total
                if available < end:
                    break
                header_end = start + 8 + header_len
                try:
                    cmd = decode_header(source[start + 8 : header_end], serialize_type)
                except HeaderValueError as exc:
                    if exc.opaque is None:
                        raise
                    self.refused.append((exc.opaque, serialize_type, exc.reason))
                    start = end
                    continue
                body = source[header_end:end]
                cmd.body = body if type(body) is bytes else bytes(body)
                commands.append(cmd)
                start = end
        finally:
            # Consumed frames leave the buffer in one move, not one move per frame (a read
            # holding 64 pipelined requests would shift the rest of the buffer 64 times).
            if source is buffer:
                del buffer[:start]
            elif start < available:
                buffer += memoryview(data)[start:]  # the start of a frame still to come
        return commands
