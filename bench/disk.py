"""The disk's own limits, measured the same way the store uses it.

Benchmarks print the store's figures next to these so a reader sees how close the broker comes
to the hardware: sequential write + fdatasync of a given volume, and how many small
write + fdatasync round trips the device sustains per second.
"""

import os
import tempfile
import time

CHUNK = 1 << 20


def sequential_write_mb_s(directory: str, total_bytes: int) -> float:
    """Write ``total_bytes`` sequentially in 1 MiB chunks, fdatasync once, return MB/s."""
    chunk = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(dir=directory, prefix="bench-seq-")
    try:
        start = time.perf_counter()
        written = 0
        while written < total_bytes:
            written += os.write(fd, chunk[: min(CHUNK, total_bytes - written)])
        os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return total_bytes / elapsed / 1e6


def fdatasync_per_s(directory: str, record_size: int = 1024, seconds: float = 2.0) -> float:
    """Append ``record_size`` bytes and fdatasync in a loop for ``seconds``; return syncs/s."""
    record = os.urandom(record_size)
    fd, path = tempfile.mkstemp(dir=directory, prefix="bench-sync-")
    try:
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            os.write(fd, record)
            os.fdatasync(fd)
            count += 1
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return count / elapsed
