"""REGISTER_BROKER request bodies: RocketMQ's JSON form and its compressed form.

A broker with ``compressedRegister=true`` sends a zlib stream instead of JSON: a 4-byte big-endian
length before each part — the DataVersion JSON, then the topic count and one line per topic
(``name readQueueNums writeQueueNums perm topicFilterType [attributes JSON]``, space separated),
then the filter-server list as JSON. ``bodyCrc32``, when a broker sends it, is the CRC32 of the
body as sent (``broker.common.crc.crc32``, RocketMQ's ``UtilAll.crc32``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from broker.common import fastjson
from broker.common.java_enums import TOPIC_CONFIG, TOPIC_FILTER_TYPE, EnumValueError, read_enum_fields

_LENGTH = struct.Struct(">i")
# Topics one registration may carry. A broker holds at most maxTopicCount (20,000 by default) plus
# two per group (retry, DLQ) and its system topics; more is a forged or corrupt body, and the name
# server would keep and list every one.
MAX_TOPICS = 100_000
# A compressed body may inflate to no more than this (RocketMQ's 16 MiB frame limit x 4): a few
# kilobytes of zlib can otherwise inflate to gigabytes in the name server's memory.
MAX_INFLATED_BYTES = 64 * 1024 * 1024


class RegisterBodyError(ValueError):
    """The body cannot be read as a registration; the message says what was wrong."""


@dataclass
class RegisterBody:
    topic_configs: dict[str, dict] = field(default_factory=dict)
    data_version: dict = field(default_factory=dict)
    filter_servers: list[str] = field(default_factory=list)


def encode_compressed_body(topic_configs: dict[str, dict], data_version: dict) -> bytes:
    """The compressed form a RocketMQ broker with ``compressedRegister=true`` sends. The topic
    queue mapping count (0: none) closes it, which RocketMQ 5's name server reads and this
    one's decoder leaves alone. Each topic's ``topicSysFlag`` and ``order`` are not in its line
    (as RocketMQ's ``TopicConfig.encode``): the routes show a sys flag of 0."""
    parts = [_part(fastjson.dumps(data_version)), _LENGTH.pack(len(topic_configs))]
    for name, config in topic_configs.items():
        line = (
            f"{name} {config['readQueueNums']} {config['writeQueueNums']} {config['perm']} "
            f"{config.get('topicFilterType') or 'SINGLE_TAG'}"
        )
        parts.append(_part(line.encode()))
    parts += [_part(b"[]"), _LENGTH.pack(0)]
    # Level 9 as RocketMQ's Deflater.BEST_COMPRESSION; zlib gives up the GIL while it works.
    return zlib.compress(b"".join(parts), 9)


def _part(raw: bytes) -> bytes:
    return _LENGTH.pack(len(raw)) + raw


def decode_register_body(body: bytes, compressed: bool) -> RegisterBody:
    if not body:
        return RegisterBody()
    if not compressed:
        try:
            data = fastjson.loads(body) or {}
        except ValueError as exc:
            raise RegisterBodyError(f"the registration body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RegisterBodyError("the registration body is not a JSON object")
        wrapper = data.get("topicConfigSerializeWrapper") or {}
        if not isinstance(wrapper, dict):
            raise RegisterBodyError("topicConfigSerializeWrapper is not a JSON object")
        filter_servers = data.get("filterServerList") or []
        if not isinstance(filter_servers, list):
            raise RegisterBodyError("filterServerList is not a list")
        return RegisterBody(
            _checked_table(wrapper.get("topicConfigTable") or {}),
            _checked_object(wrapper.get("dataVersion") or {}, "dataVersion"),
            filter_servers,
        )
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise RegisterBodyError(f"the compressed registration body does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise RegisterBodyError(
            f"the compressed registration body inflates to more than {MAX_INFLATED_BYTES} bytes"
        )
    return _decode_inflated(_Reader(raw))


_QUEUE_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
# The most queues a broker lets a topic have (the top of its maxTopicQueueNums): a registration
# declaring more is forged, and every client routed to it would build that many queue objects.
MAX_QUEUE_NUMS = 65536


def _check_queue_counts(topic: str, config: dict) -> None:
    for field_name in ("readQueueNums", "writeQueueNums"):
        if not 0 <= config.get(field_name, 0) <= MAX_QUEUE_NUMS:
            raise RegisterBodyError(
                f"{field_name}={config[field_name]} of the topic {topic!r} is not between 0 "
                f"and {MAX_QUEUE_NUMS}"
            )


def _checked_table(table: object) -> dict[str, dict]:
    """The topic config table with each entry an object whose counts are whole numbers."""
    if not isinstance(table, dict):
        raise RegisterBodyError("topicConfigTable is not a JSON object")
    if len(table) > MAX_TOPICS:
        raise RegisterBodyError(f"the registration carries {len(table)} topics, more than {MAX_TOPICS}")
    for topic, config in table.items():
        if not isinstance(config, dict):
            raise RegisterBodyError(f"the topic config of {topic!r} is not a JSON object")
        for field_name in _QUEUE_FIELDS:
            value = config.get(field_name, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise RegisterBodyError(f"{field_name} of the topic {topic!r} is not a whole number")
        _check_queue_counts(topic, config)
        try:  # as fastjson reads TopicConfig: a name or an ordinal
            read_enum_fields(config, TOPIC_CONFIG)
        except EnumValueError as exc:
            raise RegisterBodyError(f"the topic {topic!r}: {exc}") from None
    return table


def _checked_object(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise RegisterBodyError(f"{what} is not a JSON object")
    return value


def _decode_inflated(reader: _Reader) -> RegisterBody:
    result = RegisterBody()
    result.data_version = _checked_object(_json(reader.chunk(), "data version") or {}, "dataVersion")
    count = reader.int()
    if not 0 <= count <= MAX_TOPICS:
        raise RegisterBodyError(f"the compressed registration body declares {count} topics")
    for _ in range(count):
        config = topic_config_from_line(reader.chunk().decode("utf-8", errors="replace"))
        result.topic_configs[config["topicName"]] = config
    result.filter_servers = list(_json(reader.chunk(), "filter server list") or [])
    return result


def topic_config_from_line(line: str) -> dict:
    """One topic of a compressed registration (RocketMQ's ``TopicConfig.encode`` text)."""
    parts = line.split(" ")
    if len(parts) < 5 or not parts[0]:
        raise RegisterBodyError(f"the topic entry {_shown(line)} does not have its five fields")
    name, read_nums, write_nums, perm, filter_type = parts[:5]
    try:
        config = {
            "topicName": name,
            "readQueueNums": int(read_nums),
            "writeQueueNums": int(write_nums),
            "perm": int(perm),
            "topicFilterType": filter_type,
        }
    except ValueError:
        raise RegisterBodyError(
            f"the topic entry {_shown(line)} has a non-numeric queue count or perm"
        ) from None
    _check_queue_counts(name, config)
    # TopicConfig.decode reads it with TopicFilterType.valueOf: the exact name, nothing else.
    problem = TOPIC_FILTER_TYPE.name_problem(filter_type, f"the topic {_shown(name)}: topicFilterType")
    if problem:
        raise RegisterBodyError(problem)
    attributes = " ".join(parts[5:]).strip()
    if attributes:  # RocketMQ 5 appends the topic's attributes as JSON (a map of strings)
        try:
            read = fastjson.loads(attributes)
        except ValueError:  # a JsonBodyError too: nested past fastjson's limit
            read = None
        # As TopicConfig.decode: attributes that do not read as a map are left out, and the
        # topic is kept (their text may hold spaces, so a line can split them).
        if isinstance(read, dict):
            config["attributes"] = read
    return config


def _shown(text: str) -> str:
    """``text`` quoted for a refusal, cut short: a line of a forged body can be megabytes."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _json(raw: bytes, what: str):
    try:
        return fastjson.loads(raw) if raw else None
    except ValueError as exc:
        raise RegisterBodyError(f"the {what} of the compressed registration is not JSON: {exc}") from None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int(self) -> int:
        if self.pos + 4 > len(self.data):
            raise RegisterBodyError("the compressed registration body ends inside a length field")
        (value,) = _LENGTH.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def chunk(self) -> bytes:
        length = self.int()
        if length < 0 or self.pos + length > len(self.data):
            raise RegisterBodyError(
                f"a part of the compressed registration declares {length} bytes, "
                f"{len(self.data) - self.pos} remain"
            )
        part = self.data[self.pos : self.pos + length]
        self.pos += length
        return part
