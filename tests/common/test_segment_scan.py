"""The one segment walker (store recovery, re-dispatch and the Spark rows): where a walk stops and
what ``segment_end`` says lies there."""

import pytest

from broker.common.message import MessageExt
from broker.common.message_codec import MIN_RECORD_SIZE, encode_blank, encode_message
from broker.common.segment_scan import (
    BLANK_END,
    BLANK_SHORT,
    END_OF_DATA,
    TORN,
    UNWRITTEN,
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
