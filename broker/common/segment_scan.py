"""Walking the records of a commit-log segment, for the store and the Spark job alike.

A segment is a run of records (``totalSize 4 | magicCode 4 | …``, see ``message_codec``). It ends
where the data ends, at a blank end-of-segment record, at zero bytes (never written) or at bytes
that are no record (a torn or garbled tail). ``segment_records`` yields every record whose header
is sound; ``segment_end`` says what lies where that walk stopped. The store's recovery and
re-dispatch and the Spark job's row mapper both walk segments with these two, each deciding what
a stop means to it (the store cuts a torn tail; the Spark job reports it as a row).

Depends only on ``message_codec``, so it ships to Spark executors with the rest of
``broker/common`` (``analytics/spark/codec_zip.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from .message_codec import (
    BLANK,
    BLANK_MAGIC_CODE,
    INT,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    record_damage,
)

# What ``segment_end`` finds where a walk stopped.
END_OF_DATA = "end_of_data"  # exactly at the limit: nothing more to read
BLANK_END = "blank_end"  # a blank record filling the rest of the segment (the store's seal)
BLANK_SHORT = "blank_short"  # a blank record whose size does not reach the limit
UNWRITTEN = "unwritten"  # a zero header: the segment was still being written
TORN = "torn"  # anything else: a few stray bytes, a garbled header, a record running past the limit

_unpack_header = BLANK.unpack_from
# The magic codes as stored, searched for byte by byte when a walk resynchronises after damage.
_MAGICS = tuple(INT.pack(code) for code in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE))


def segment_records(buf: bytes | bytearray | memoryview, start: int = 0, limit: int | None = None
                    ) -> Iterator[tuple[int, int]]:  # fmt: skip
    """Yield ``(position, size)`` of each record from ``start`` whose header is sound (message magic,
    a size of at least one record that stays within ``limit``, the buffer's length by default).

    Stops silently at the first header that is not such a record; ``segment_end`` at the position
    after the last yielded record says what is there. The record's contents are not checked: the
    caller decodes what it needs and stops where that fails.
    """
    if limit is None:
        limit = len(buf)
    pos = start
    while pos + 8 <= limit:
        size, magic = _unpack_header(buf, pos)
        if (magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2) or size < MIN_RECORD_SIZE:
            return
        if pos + size > limit:
            return
        yield pos, size
        pos += size


def segment_end(buf: bytes | bytearray | memoryview, pos: int, limit: int | None = None) -> str:
    """What lies at ``pos``, where a walk of the segment stopped (one of the constants above)."""
    if limit is None:
        limit = len(buf)
    if pos + 8 > limit:
        return END_OF_DATA if pos == limit else TORN
    size, magic = _unpack_header(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return BLANK_END if size == limit - pos else BLANK_SHORT
    if size == 0 and magic == 0:
        return UNWRITTEN
    return TORN


def resume_after(buf: bytes | bytearray | memoryview, pos: int, limit: int, base_offset: int) -> int | None:
    """Where sound records begin again after a walk that stopped at ``pos``, or None when what
    is there truly ends the data: the limit, the blank seal, or bytes (zeros included) with no
    sound record after them (a torn tail, the unwritten rest of a segment).

    Zeros or garbage followed by a sound record are damage, not an end: a crash cuts only the
    last write, and a stale record left from earlier data cannot carry its own position.
    """
    if segment_end(buf, pos, limit) in (END_OF_DATA, BLANK_END):
        return None
    return next_record_start(buf, pos + 1, limit, base_offset)


def next_record_start(
    buf: bytes | bytearray | memoryview, start: int, limit: int, base_offset: int
) -> int | None:
    """The first position from ``start`` where a sound record begins again, or None before ``limit``.

    Used past damage: a position counts when an intact record starts there (magic code, sizes,
    body CRC, and the physical offset it was stored with, ``base_offset`` + position, which
    stray bytes inside a body cannot fake by chance) or the segment's blank seal that reaches
    ``limit`` exactly.
    """
    haystack = _searchable(buf)
    pos = start
    while True:
        hits = [hit for hit in (haystack.find(magic, pos + 4, limit) for magic in _MAGICS) if hit >= 0]
        if not hits:
            return None
        candidate = min(hits) - 4
        if _starts_here(buf, candidate, limit, base_offset):
            return candidate
        pos = candidate + 1


def _starts_here(buf: bytes | bytearray | memoryview, pos: int, limit: int, base_offset: int) -> bool:
    size, magic = _unpack_header(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return size == limit - pos
    return pos + size <= limit and record_damage(buf, pos, base_offset + pos) is None


def _searchable(buf: bytes | bytearray | memoryview):
    """Something with ``find`` over the same bytes: a mapped segment's mmap itself, not a copy."""
    if not isinstance(buf, memoryview):
        return buf
    owner = buf.obj
    if hasattr(owner, "find") and len(owner) == buf.nbytes:  # type: ignore[arg-type]
        return owner
    return bytes(buf)
