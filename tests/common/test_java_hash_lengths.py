"""Java's String.hashCode for strings of every length a client can send: the cached-weights path
(short strings) and the plain loop (long ones) agree with Java's definition, and long strings no
longer grow the weights cache."""

import pytest

from broker.common import java_hash
from broker.common.java_hash import java_hash_continued, java_string_hash


def reference(text: str) -> int:
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("length", [0, 1, 31, 255, 256, 257, 1000, 32_768])
def test_every_length_hashes_as_java(length):
    text = ("abcé漢Z9" * (length // 7 + 1))[:length]
    assert java_string_hash(text) == reference(text)
    prefix = java_hash_continued(0, "Topic#")
    assert java_hash_continued(prefix, text) == java_hash_continued(0, "Topic#" + text)


def test_long_strings_do_not_fill_the_weights_cache():
    java_hash._powers.cache_clear()
    for length in range(1000, 1300):
        java_string_hash("k" * length)
    assert java_hash._powers.cache_info().currsize == 0
    assert java_string_hash("hello") == 99162322
