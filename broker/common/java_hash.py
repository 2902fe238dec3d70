"""Java's ``String.hashCode``, which RocketMQ uses for tag codes and index keys.

Brokers and clients must agree on these numbers bit for bit (a consumer's subscription carries
tag hash codes that the broker compares with the consume-queue entries), so they follow Java:
31-based polynomial over UTF-16 code units, wrapped to a signed 32-bit int.
"""

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Return ``text.hashCode()`` as Java computes it (signed 32-bit)."""
    h = 0
    if text.isascii():
        for ch in text.encode("ascii"):
            h = (31 * h + ch) & _MASK
    else:
        data = text.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def tag_hash_code(tags: str | None) -> int:
    """Consume-queue tag code of a message: the tag's Java hash, 0 when it has none."""
    return java_string_hash(tags) if tags else 0
