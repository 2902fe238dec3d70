"""Client-side unique message ids (UNIQ_KEY), laid out as RocketMQ's MessageClientIDSetter.

16 bytes as 32 upper-case hex digits: client IPv4 address (4), process id (2), a per-process
random number (4) — then milliseconds since the start of the current month (4) and a counter
(2). The time part lets a broker or an operator narrow an index search to when it was sent.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import random
import socket
import struct
import threading
import time

_TIME_AND_COUNTER = struct.Struct(">iH")


def _local_ipv4() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            # connect() on UDP sends nothing; it only picks the outgoing interface.
            probe.connect(("10.255.255.255", 1))
            return socket.inet_aton(probe.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


def _month_start_ms(now_ms: int) -> int:
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class MessageIdGenerator:
    """Thread-safe generator of unique ids for one process."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None) -> None:
        prefix = (ip or _local_ipv4()) + struct.pack(">H", (pid or os.getpid()) & 0xFFFF)
        prefix += struct.pack(">i", random.getrandbits(31))
        self._prefix_hex = prefix.hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._month_start = 0
        self._next_month = 0

    def next_id(self, now_ms: int | None = None) -> str:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if now_ms >= self._next_month or now_ms < self._month_start:
                self._roll_month(now_ms)
            counter = next(self._counter) & 0xFFFF
        diff = (now_ms - self._month_start) & 0xFFFFFFFF
        if diff >= 1 << 31:
            diff -= 1 << 32
        return self._prefix_hex + _TIME_AND_COUNTER.pack(diff, counter).hex().upper()

    def _roll_month(self, now_ms: int) -> None:
        self._month_start = _month_start_ms(now_ms)
        start = dt.datetime.fromtimestamp(self._month_start / 1000)
        following = (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        self._next_month = int(following.timestamp() * 1000)


_default = MessageIdGenerator()


def create_unique_id() -> str:
    return _default.next_id()


def unique_id_ip(msg_id: str) -> str:
    """The producer's IPv4 address encoded in a unique id."""
    return socket.inet_ntoa(bytes.fromhex(msg_id[:8]))


def unique_id_timestamp(msg_id: str, reference_ms: int | None = None) -> int:
    """When the id was made (ms), assuming the month of ``reference_ms`` (now by default).

    Ids carry only the offset into their month, so an id made near a month end and read in
    the next month resolves into the previous month (as RocketMQ does).
    """
    reference_ms = int(time.time() * 1000) if reference_ms is None else reference_ms
    diff = _TIME_AND_COUNTER.unpack(bytes.fromhex(msg_id[20:32]))[0]
    start = _month_start_ms(reference_ms)
    if start + diff > reference_ms:
        previous = dt.datetime.fromtimestamp(start / 1000) - dt.timedelta(days=1)
        start = _month_start_ms(int(previous.timestamp() * 1000))
    return start + diff
