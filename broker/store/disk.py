"""How full the store's disk is, as RocketMQ reports and acts on it.

Used space is measured against what the broker can use: used + available to unprivileged users,
as ``df``'s Use% and RocketMQ's ``getDiskPartitionSpaceUsedPercent`` do. Blocks reserved for
root never hold the broker's files, so against the raw total a disk is full before it looks
75 % used (here: 29 GB used, 74 GB available of a 252 GB total is 28 % used, not 11 %).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

_UNITS = "KMGTPE"


def existing_path(path: str | Path) -> str:
    """``path``, or its nearest existing parent: a directory not made yet (no topic has a queue)
    is on its parent's filesystem."""
    candidate = Path(path)
    while not candidate.exists() and candidate.parent != candidate:
        candidate = candidate.parent
    return str(candidate)


def free_bytes(path: str | Path) -> int:
    """Bytes an unprivileged process can still allocate on the filesystem holding ``path``."""
    st = os.statvfs(existing_path(path))
    return st.f_bavail * st.f_frsize


def disk_used_percent(path: str) -> float:
    """Percentage (0-100) of the usable space of the filesystem holding ``path`` in use."""
    usage = shutil.disk_usage(path)
    usable = usage.used + usage.free
    return 100.0 * usage.used / usable if usable else 0.0


def disk_used_fraction(path: str) -> float:
    """RocketMQ's runtime figure (``commitLogDiskRatio``): the used share rounded up to a whole
    percent, as a fraction (0.28); -1 when ``path`` cannot be measured."""
    try:
        return math.ceil(disk_used_percent(path)) / 100
    except OSError:
        return -1.0


def capacity_text(path: str) -> str:
    """``commitLogDirCapacity``: "Total : 252.0 GiB, Free : 74.0 GiB." (binary units, as
    RocketMQ's humanReadableByteCount)."""
    usage = shutil.disk_usage(path)
    return f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."


def human_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    exponent = min(int(math.log(count, 1024)), len(_UNITS))
    return f"{count / 1024**exponent:.1f} {_UNITS[exponent - 1]}iB"
