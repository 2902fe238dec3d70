"""The one codec of RocketMQ's stored-message layout.

Every record in a commit-log segment, and every message in a pull response body, has this
layout (big-endian)::

    totalSize 4 | magicCode 4 | bodyCRC 4 | queueId 4 | flag 4 | queueOffset 8 | physicalOffset 8
    | sysFlag 4 | bornTimestamp 8 | bornHost 8 (IPv4+port) or 20 (IPv6+port) | storeTimestamp 8
    | storeHost 8 or 20 | reconsumeTimes 4 | preparedTransactionOffset 8 | bodyLength 4 | body
    | topicLength 1 (2 with the V2 magic) | topic | propertiesLength 2 | properties

A segment's unused tail starts with a blank record: ``totalSize 4 | BLANK_MAGIC_CODE 4``.

The store, the broker, the client and the analytics jobs all import this module (it depends on
nothing outside the standard library so it ships to Spark executors as-is). The write path
encodes a record once, outside the store's lock, leaving queue offset, physical offset and store
timestamp to be patched in place under the lock (``patch_store_fields``).
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterator
from functools import lru_cache

from .message import HostPort, MessageExt
from .sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB: topic length on 2 bytes
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767

# Fixed-position fields, patched in place under the store's lock (and sysFlag, read first).
QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYS_FLAG_POSITION = 36
BORN_HOST_POSITION = 48

# totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset, sysFlag, bornTimestamp
HEAD = struct.Struct(">iiiiiqqiq")
# The whole fixed part for IPv4 hosts in one pack (the common case on the hot path).
FIXED_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
BLANK = struct.Struct(">ii")
INT = struct.Struct(">i")
LONG = struct.Struct(">q")
SHORT = struct.Struct(">h")
UBYTE = struct.Struct(">B")
USHORT = struct.Struct(">H")
# reconsumeTimes, preparedTransactionOffset, bodyLength
TAIL_FIELDS = struct.Struct(">iqi")
# totalSize, magic, bodyCRC, physicalOffset, sysFlag: what a read checks first
_CHECKED_HEAD = struct.Struct(">iii16xqi")

MIN_RECORD_SIZE = FIXED_V4.size + UBYTE.size + SHORT.size
_V6_HOSTS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


class MessageDecodeError(ValueError):
    """Bytes that are not a well-formed stored message."""


# -- properties -------------------------------------------------------------------------------
_join_pair = NAME_VALUE_SEPARATOR.join


def properties_to_string(properties: dict[str, str]) -> str:
    if not properties:
        return ""
    try:
        return PROPERTY_SEPARATOR.join(map(_join_pair, properties.items())) + PROPERTY_SEPARATOR
    except TypeError:  # a value set by hand that is not a string
        return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items())


def string_to_properties(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


# -- hosts ------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def encode_host(host: HostPort) -> bytes:
    """``(ip, port)`` as RocketMQ stores it: 4 or 16 address bytes, then the port as an int."""
    ip, port = host
    try:
        packed = socket.inet_pton(socket.AF_INET, ip)
    except OSError:
        packed = socket.inet_pton(socket.AF_INET6, ip)
    return packed + INT.pack(port)


def decode_host(raw: bytes | memoryview) -> HostPort:
    family = socket.AF_INET if len(raw) == 8 else socket.AF_INET6
    return socket.inet_ntop(family, bytes(raw[:-4])), INT.unpack_from(raw, len(raw) - 4)[0]


def host_sys_flags(born_host: bytes, store_host: bytes) -> int:
    """The IPv6 bits ``sysFlag`` must carry for the given encoded hosts."""
    flags = BORNHOST_V6_FLAG if len(born_host) == 20 else 0
    return flags | (STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0)


def store_timestamp_position(sys_flag: int) -> int:
    return BORN_HOST_POSITION + (20 if sys_flag & BORNHOST_V6_FLAG else 8)


# -- encoding ---------------------------------------------------------------------------------
def encode_record(
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_host: bytes,
    body: bytes,
    topic: bytes,
    properties: bytes,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    store_timestamp: int = 0,
    body_crc: int | None = None,
) -> bytearray:
    """Encode one stored record. Hosts come from ``encode_host``; ``sys_flag`` must already
    carry the matching IPv6 bits (``host_sys_flags``). Lengths are validated by the caller."""
    if body_crc is None:
        body_crc = zlib.crc32(body) & 0x7FFFFFFF
    body_len = len(body)
    topic_len = len(topic)
    total = FIXED_V4.size + body_len + 1 + topic_len + 2 + len(properties)
    if len(born_host) == 8 and len(store_host) == 8:
        fixed = FIXED_V4.pack(
            total, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, physical_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, body_len,
        )  # fmt: skip
    else:
        total += len(born_host) + len(store_host) - 16
        fixed = b"".join((
            HEAD.pack(total, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset,
                      physical_offset, sys_flag, born_timestamp),
            born_host, LONG.pack(store_timestamp), store_host,
            TAIL_FIELDS.pack(reconsume_times, prepared_transaction_offset, body_len),
        ))  # fmt: skip
    # bytearray().join: one copy into the mutable record (bytearray(b"".join(…)) made two).
    return bytearray().join((fixed, body, UBYTE.pack(topic_len), topic, SHORT.pack(len(properties)),
                             properties))  # fmt: skip


def encode_message(msg: MessageExt) -> bytearray:
    """Encode a full ``MessageExt`` (used by tests, the client and tools, not the hot path)."""
    born_host = encode_host(tuple(msg.born_host))
    store_host = encode_host(tuple(msg.store_host))
    sys_flag = (msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)) | host_sys_flags(
        born_host, store_host
    )
    return encode_record(
        queue_id=msg.queue_id, flag=msg.flag, sys_flag=sys_flag, born_timestamp=msg.born_timestamp,
        born_host=born_host, store_host=store_host, body=bytes(msg.body),
        topic=msg.topic.encode(), properties=properties_to_string(msg.properties).encode(),
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        queue_offset=msg.queue_offset, physical_offset=msg.commitlog_offset,
        store_timestamp=msg.store_timestamp,
    )  # fmt: skip


_OFFSETS = struct.Struct(">qq")  # queueOffset, physicalOffset: adjacent at byte 20
_STORE_TS_V4 = BORN_HOST_POSITION + 8
_STORE_TS_V6 = BORN_HOST_POSITION + 20


def patch_store_fields(
    buf: bytearray | memoryview,
    pos: int,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
    sys_flag: int | None = None,
) -> None:
    """Fill in what is only known under the store's lock, in a record already encoded."""
    _OFFSETS.pack_into(buf, pos + QUEUE_OFFSET_POSITION, queue_offset, physical_offset)
    if sys_flag is None:
        sys_flag = INT.unpack_from(buf, pos + 36)[0]
    store_ts_at = _STORE_TS_V6 if sys_flag & BORNHOST_V6_FLAG else _STORE_TS_V4
    LONG.pack_into(buf, pos + store_ts_at, store_timestamp)


def encode_blank(size: int) -> bytes:
    """The end-of-segment marker filling ``size`` bytes (only its first 8 bytes matter)."""
    return BLANK.pack(size, BLANK_MAGIC_CODE)


# -- message ids -----------------------------------------------------------------------------
def create_offset_msg_id(store_host: bytes, commitlog_offset: int) -> str:
    """offsetMsgId: encoded store host (address + port) then the commit-log offset, as hex."""
    return (store_host + LONG.pack(commitlog_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[HostPort, int]:
    """Split an offsetMsgId into ``((ip, port), commitlog_offset)``."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageDecodeError(f"message id {msg_id!r} is not hexadecimal") from exc
    if len(raw) not in (16, 28):
        raise MessageDecodeError(f"message id {msg_id!r} has {len(raw)} bytes, expected 16 or 28")
    return decode_host(raw[:-8]), LONG.unpack_from(raw, len(raw) - 8)[0]


# -- decoding --------------------------------------------------------------------------------
def read_record_size(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """``(totalSize, magicCode)`` of the record at ``pos`` (validated by the caller)."""
    if pos + 8 > len(buf):
        raise MessageDecodeError(f"record header at {pos} runs past the end of the buffer")
    return BLANK.unpack_from(buf, pos)


# What garbled bytes make the decoding raise (reported as MessageDecodeError).
_MALFORMED = (struct.error, IndexError, ValueError, OSError, zlib.error)


def record_damage(
    buf: bytes | bytearray | memoryview, pos: int, offset: int, size: int | None = None
) -> str | None:
    """Why the record at ``pos`` (stored at commit-log ``offset``) is not intact, or None.

    Cheaper than a decode, for every record a read serves: the header (magic, size — ``size``
    when the reader knows it —, the physical offset the record was stored with), the body CRC
    and the lengths that must end the record. A record copied from elsewhere or garbled
    anywhere but inside its topic or properties text fails one of them.
    """
    try:
        total, magic, body_crc, physical_offset, sys_flag = _CHECKED_HEAD.unpack_from(buf, pos)
        if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
            return "bad magic code"
        if total < MIN_RECORD_SIZE or (size is not None and total != size) or pos + total > len(buf):
            return "bad record size"
        if physical_offset != offset:
            return "wrong physical offset"
        cur = pos + FIXED_V4.size
        if sys_flag & _V6_HOSTS:
            cur += (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (
                12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0
            )
        body_len = INT.unpack_from(buf, cur - 4)[0]
        end = pos + total
        if body_len < 0 or cur + body_len + 3 > end:
            return "bad body length"
        if zlib.crc32(buf[cur : cur + body_len]) & 0x7FFFFFFF != body_crc:
            return "body CRC mismatch"
        cur += body_len
        if magic == MESSAGE_MAGIC_CODE:
            cur += 1 + buf[cur]
        else:
            cur += 2 + USHORT.unpack_from(buf, cur)[0]
        if cur + 2 + SHORT.unpack_from(buf, cur)[0] != end:
            return "bad topic or properties length"
    except _MALFORMED:
        return "truncated record"
    return None


def record_queue(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[bytes, int, int]:
    """``(topic, queueId, queueOffset)`` of a record ``record_damage`` found sound: the header
    fields that say which consume-queue entry may point at it (the body is not read)."""
    magic, queue_id = struct.unpack_from(">4xi4xi", buf, pos)
    queue_offset, sys_flag = (
        LONG.unpack_from(buf, pos + QUEUE_OFFSET_POSITION)[0],
        INT.unpack_from(buf, pos + SYS_FLAG_POSITION)[0],
    )
    cur = pos + FIXED_V4.size
    if sys_flag & _V6_HOSTS:
        cur += (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0)
    cur += INT.unpack_from(buf, cur - 4)[0]
    if magic == MESSAGE_MAGIC_CODE:
        length, cur = buf[cur], cur + 1
    else:
        length, cur = USHORT.unpack_from(buf, cur)[0], cur + 2
    return bytes(buf[cur : cur + length]), queue_id, queue_offset


def decode_message(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    read_body: bool = True,
    check_crc: bool = False,
    decompress_body: bool = False,
) -> MessageExt:
    """Decode the record at ``pos``. Any malformed input raises ``MessageDecodeError``."""
    try:
        return _decode(memoryview(buf), pos, read_body, check_crc, decompress_body)
    except MessageDecodeError:
        raise
    except _MALFORMED as exc:
        raise MessageDecodeError(f"malformed message at {pos}: {exc}") from exc


def _decode(view: memoryview, pos: int, read_body: bool, check_crc: bool, decompress: bool) -> MessageExt:
    total, magic = read_record_size(view, pos)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise MessageDecodeError(f"bad magic code {magic:#x} at {pos}")
    end = pos + total
    if total < MIN_RECORD_SIZE or end > len(view):
        raise MessageDecodeError(f"record at {pos} declares {total} bytes, {len(view) - pos} available")
    if not INT.unpack_from(view, pos + SYS_FLAG_POSITION)[0] & _V6_HOSTS:
        # IPv4 hosts (the common case): the whole fixed part in one unpack.
        (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_raw,
         store_ts, store_raw, reconsume_times, prepared_offset,
         body_len) = FIXED_V4.unpack_from(view, pos)  # fmt: skip
        cur = pos + FIXED_V4.size
    else:
        (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
         born_ts) = HEAD.unpack_from(view, pos)  # fmt: skip
        cur = pos + HEAD.size
        born_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
        born_raw = bytes(view[cur : cur + born_len])
        cur += born_len
        store_ts = LONG.unpack_from(view, cur)[0]
        cur += 8
        store_len = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
        store_raw = bytes(view[cur : cur + store_len])
        cur += store_len
        reconsume_times, prepared_offset, body_len = TAIL_FIELDS.unpack_from(view, cur)
        cur += TAIL_FIELDS.size
    if body_len < 0 or cur + body_len > end:
        raise MessageDecodeError(f"body length {body_len} overruns the record at {pos}")
    body = view[cur : cur + body_len]
    cur += body_len
    if check_crc and zlib.crc32(body) & 0x7FFFFFFF != body_crc:
        raise MessageDecodeError(f"body CRC mismatch in the record at {pos}")
    if magic == MESSAGE_MAGIC_CODE:
        topic_len = view[cur]
        cur += 1
    else:
        topic_len = USHORT.unpack_from(view, cur)[0]
        cur += 2
    if cur + topic_len + 2 > end:
        raise MessageDecodeError(f"topic length {topic_len} overruns the record at {pos}")
    topic = str(view[cur : cur + topic_len], "utf-8")
    cur += topic_len
    props_len = SHORT.unpack_from(view, cur)[0]
    cur += 2
    if props_len < 0 or cur + props_len != end:
        raise MessageDecodeError(f"properties length {props_len} does not end the record at {pos}")
    properties = string_to_properties(str(view[cur:end], "utf-8")) if props_len else {}
    body_bytes = b""
    if read_body:
        body_bytes = bytes(body)
        if decompress and sys_flag & COMPRESSED_FLAG:
            body_bytes = zlib.decompress(body_bytes)
    # Positional, in MessageExt's field order: this runs for every message a consumer receives.
    return MessageExt(
        topic, body_bytes, flag, properties, queue_id, total, queue_offset, sys_flag, born_ts,
        _host_of(born_raw), store_ts, _host_of(store_raw), create_offset_msg_id(store_raw, physical_offset),
        physical_offset, body_crc, reconsume_times, prepared_offset,
    )  # fmt: skip


@lru_cache(maxsize=1024)
def _host_of(raw: bytes) -> HostPort:
    """``decode_host`` for the few hosts a process sees again and again (producers, brokers)."""
    return decode_host(raw)


def iter_records(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """Yield ``(position, size)`` of each record in a concatenation, stopping at a blank record.

    Raises ``MessageDecodeError`` on a size that cannot be right (a torn or garbled tail).
    """
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        total, magic = read_record_size(view, pos)
        if magic == BLANK_MAGIC_CODE:
            return
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            raise MessageDecodeError(f"bad magic code {magic:#x} at {pos}")
        if total < MIN_RECORD_SIZE or pos + total > len(view):
            raise MessageDecodeError(f"record at {pos} declares {total} bytes")
        yield pos, total
        pos += total


def decode_messages(
    buf: bytes | bytearray | memoryview,
    *,
    read_body: bool = True,
    check_crc: bool = False,
    decompress_body: bool = False,
) -> list[MessageExt]:
    """Decode a concatenation of records (a pull response body). Any malformed input raises
    ``MessageDecodeError``."""
    view = memoryview(buf)
    try:
        return [_decode(view, pos, read_body, check_crc, decompress_body) for pos, _ in iter_records(view)]
    except MessageDecodeError:
        raise
    except _MALFORMED as exc:
        raise MessageDecodeError(f"malformed message: {exc}") from exc


def decode_intact_messages(
    buf: bytes | bytearray | memoryview, *, decompress_body: bool = False
) -> tuple[list[MessageExt], list[str]]:
    """Decode a pull response body, checking every record's body CRC as a consumer receives it
    (Kafka's consumers check theirs by default): a record that fails is left out and described
    in the second list, never handed on as intact. A body whose record sizes do not add up
    raises ``MessageDecodeError`` (nothing in it can be trusted)."""
    view = memoryview(buf)
    messages: list[MessageExt] = []
    damaged: list[str] = []
    for pos, _ in iter_records(view):
        try:
            messages.append(_decode(view, pos, True, True, decompress_body))
        except _MALFORMED as exc:  # MessageDecodeError included
            damaged.append(str(exc))
    return messages, damaged
