"""A real small filesystem for full-disk tests: a tmpfs of a few MiB mounted on a test's directory.

tmpfs counts what its files hold against its size and answers ENOSPC past it, and it supports
fallocate, so a store on it meets a full disk exactly as on a real one (and a write into a mapped
page it cannot back is SIGBUS, as the issue saw). Mounting needs CAP_SYS_ADMIN: where the
kernel answers EPERM the test is skipped with that reason; any other failure is an error.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from broker.local_cluster import LocalCluster

_MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@contextmanager
def small_disk(directory: Path, size: int) -> Iterator[Path]:
    """``directory`` as the mount point of a ``size``-byte tmpfs, unmounted on the way out."""
    directory.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0755".encode()
    if _libc.mount(b"tmpfs", str(directory).encode(), b"tmpfs", 0, options) != 0:
        code = ctypes.get_errno()
        if code == errno.EPERM:
            pytest.skip(
                f"mounting a tmpfs is not permitted here ({os.strerror(code)}): no small disk to fill"
            )
        raise OSError(code, f"mount -t tmpfs {directory}: {os.strerror(code)}")
    try:
        yield directory
    finally:
        # Detached if still busy (a broker that would not stop): gone once it exits.
        if _libc.umount2(str(directory).encode(), 0) != 0:
            _libc.umount2(str(directory).encode(), _MNT_DETACH)


def free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def fill(directory: Path, leave: int = 0) -> Path:
    """Take all the free space of ``directory``'s filesystem but ``leave`` bytes, in one file
    (``filler``); deleting it gives the space back."""
    filler = directory / "filler"
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(filler, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # A running store may take space between the measure and the allocation (a consume-queue
        # file made by its dispatch): then measure again and take what is left.
        for _ in range(100):
            room = free_bytes(directory) - leave
            room -= room % page
            if room <= 0:
                break
            try:
                os.posix_fallocate(fd, os.fstat(fd).st_size, room)
                break
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        else:
            raise AssertionError(f"could not fill {directory}: its free space kept changing")
    finally:
        os.close(fd)
    return filler


class SmallDiskCluster(LocalCluster):
    """A cluster whose broker's store is on a small tmpfs."""

    disk: Path  # the tmpfs, mounted for the cluster's life


@contextmanager
def broker_on_small_disk(
    workdir: Path,
    disk_bytes: int,
    cluster_name: str,
    broker: str,
    settings: Mapping[str, object],
    topics: tuple[str, ...],
) -> Iterator[SmallDiskCluster]:
    """A name server and ``broker`` whose store is on a ``disk_bytes`` tmpfs (``cluster.disk``):
    store files small enough for a few MiB, acked messages never deleted to make room
    (``cleanFileForciblyEnable=false``), ``settings`` on top; ``topics`` created with one queue."""
    with small_disk(workdir / "disk", disk_bytes) as disk:
        (workdir / "cluster").mkdir()
        local = SmallDiskCluster(workdir / "cluster", cluster_name)
        try:
            store = {
                "storePathRootDir": disk / "store",
                "mappedFileSizeCommitLog": 256 * 1024,
                "mappedFileSizeConsumeQueue": 300 * 20,
                "maxHashSlotNum": 1000,
                "maxIndexNum": 4000,
                "cleanFileForciblyEnable": "false",
            }
            local.add_broker(broker, {**store, **settings})
            for topic in topics:
                local.create_topic(topic, queues=1)
            local.disk = disk
            yield local
        finally:
            local.stop()
