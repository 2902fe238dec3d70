"""Java's ``String.hashCode``, which RocketMQ uses for tag codes and index keys.

Brokers and clients must agree on these numbers bit for bit (a consumer's subscription carries
tag hash codes that the broker compares with the consume-queue entries), so they follow Java:
31-based polynomial over UTF-16 code units, wrapped to a signed 32-bit int.
"""

from functools import lru_cache
from operator import mul

_MASK = 0xFFFFFFFF
# Strings up to this long (nearly every tag and key) hash with cached weights; the cache then
# holds at most 256 x 257 small ints.
_CACHED_LENGTHS = 256


@lru_cache(maxsize=256)
def _powers(length: int) -> tuple[int, ...]:
    """31**(length-1) … 31**0, each mod 2**32: the polynomial's weights for a string this long."""
    return tuple(pow(31, exponent, 1 << 32) for exponent in range(length - 1, -1, -1))


def java_string_hash(text: str) -> int:
    """Return ``text.hashCode()`` as Java computes it (signed 32-bit)."""
    h = java_hash_continued(0, text)
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash_continued(prefix_hash: int, text: str) -> int:
    """The unsigned 32-bit Java hash of ``prefix + text``, given the prefix's (unsigned) hash:
    callers that hash many strings with one prefix (the index's ``topic#key``) hash it once."""
    units: bytes | list[int]  # UTF-16 code units, as Java's String holds them
    if text.isascii():
        units = text.encode("ascii")
    else:
        data = text.encode("utf-16-be")
        units = [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]
    if not units:
        return prefix_hash & _MASK
    if len(units) > _CACHED_LENGTHS:
        # A long key or tag (from a client): a plain loop, ~0.1 us a unit. Weights of every length
        # up to 32K would cost a new ~200 ms computation and ~1 MB of cache per distinct length.
        h = prefix_hash
        for unit in units:
            h = (h * 31 + unit) & _MASK
        return h
    weights = _powers(len(units) + 1)  # weights[0] is 31**len: what the prefix is multiplied by
    # The weighted sum runs in C (map and sum) instead of a Python step per character: the
    # broker hashes every message's keys for the index.
    return (prefix_hash * weights[0] + sum(map(mul, units, weights[1:]))) & _MASK


def tag_hash_code(tags: str | None) -> int:
    """Consume-queue tag code of a message: the tag's Java hash, 0 when it has none."""
    return java_string_hash(tags) if tags else 0
