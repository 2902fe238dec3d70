"""The one segment walker (store recovery, re-dispatch and the Spark rows): where a walk stops and
what ``segment_end`` says lies there."""

import pytest

from broker.common.message import MessageExt
from broker.common.message_codec import MIN_RECORD_SIZE, encode_blank, encode_message, record_damage
from broker.common.segment_scan import (
    BLANK_END,
    BLANK_SHORT,
    END_OF_DATA,
    TORN,
    UNWRITTEN,
    next_record_start,
    segment_end,
    segment_records,
)


def two_records() -> tuple[bytes, list[tuple[int, int]]]:
    first = encode_message(MessageExt(topic="a", body=b"one"))
    second = encode_message(MessageExt(topic="b", body=b"x" * 100))
    return bytes(first + second), [(0, len(first)), (len(first), len(second))]


def walk(buf: bytes, start: int = 0, limit: int | None = None) -> tuple[list[tuple[int, int]], str]:
    found = list(segment_records(buf, start, limit))
    end = found[-1][0] + found[-1][1] if found else start
    return found, segment_end(buf, end, limit)


def test_records_to_the_end_of_the_data():
    data, expected = two_records()
    assert walk(data) == (expected, END_OF_DATA)


def test_a_blank_record_filling_the_rest_seals_the_segment():
    data, expected = two_records()
    sealed = data + encode_blank(64) + b"\xff" * 56
    assert walk(sealed) == (expected, BLANK_END)
    assert walk(data + encode_blank(32) + bytes(32)) == (expected, BLANK_SHORT)


def test_zero_bytes_are_a_segment_still_being_written():
    data, expected = two_records()
    assert walk(data + bytes(4096)) == (expected, UNWRITTEN)


@pytest.mark.parametrize(
    "tail",
    [b"\x01\x02\x03", b"\x00\x00\x01\x00" + b"\x12" * 300, bytes(4) + b"\x00\x00\x00\x01"],
    ids=["stray-bytes", "garbage-header", "zero-size-other-magic"],
)
def test_anything_else_is_a_torn_tail(tail):
    data, expected = two_records()
    assert walk(data + tail) == (expected, TORN)


def test_a_record_running_past_the_limit_or_too_small_is_not_yielded():
    data, expected = two_records()
    assert walk(data[:-1]) == (expected[:1], TORN)
    assert walk(data, limit=len(data) - 1) == (expected[:1], TORN)
    too_small = (MIN_RECORD_SIZE - 1).to_bytes(4, "big") + data[4:]
    assert walk(too_small) == ([], TORN)


def test_a_walk_starts_where_asked():
    data, expected = two_records()
    assert walk(data, start=expected[1][0]) == (expected[1:], END_OF_DATA)


def stored(offset: int, body: bytes, v6: bool = False) -> bytes:
    msg = MessageExt(topic="t", body=body, properties={"KEYS": "k"})
    if v6:
        msg.born_host, msg.store_host = ("::1", 1), ("::1", 2)
    msg.commitlog_offset = offset
    return bytes(encode_message(msg))


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_record_damage_names_what_a_read_finds_wrong(v6):
    record = stored(4096, b"payload" * 20, v6)
    assert record_damage(record, 0, 4096, len(record)) is None
    assert record_damage(record, 0, 4097) == "wrong physical offset"  # bytes copied from elsewhere
    assert record_damage(record, 0, 4096, len(record) + 1) == "bad record size"
    body_at = record.index(b"payload")
    flipped = bytearray(record)
    flipped[body_at + 3] ^= 0x01
    assert record_damage(flipped, 0, 4096) == "body CRC mismatch"
    assert record_damage(record[:-5], 0, 4096) == "bad record size"
    assert record_damage(b"\xab" * len(record), 0, 4096) == "bad magic code"


def test_next_record_start_finds_the_record_after_damage():
    first = stored(0, b"a" * 200)
    second = stored(len(first), b"b" * 50)
    data = bytearray(first + second + encode_blank(64).ljust(64, b"\0"))  # the seal fills the rest
    data[10:60] = b"\xab" * 50
    # A copy of the magic code inside the damage is no record: its stored offset cannot match.
    data[100:104] = data[len(first) + 4 : len(first) + 8]
    assert next_record_start(data, 1, len(data), 0) == len(first)
    assert next_record_start(data, len(first) + 1, len(data), 0) == len(first) + len(second)  # the seal
    assert next_record_start(data, len(first) + 1, len(data) - 1, 0) is None
