"""RocketMQ's checksum of a byte string (``UtilAll.crc32``): the CRC32 kept to its low 31 bits, so
it is a non-negative Java ``int``. A REGISTER_BROKER header's ``bodyCrc32`` is this of the body."""

from __future__ import annotations

import zlib


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF
