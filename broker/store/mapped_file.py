"""Fixed-size memory-mapped segment files and the ordered queue of them.

A segment is named by the 20-digit zero-padded offset of its first byte, so the file holding
any logical position is found by arithmetic. Writes go into the mapping (the page cache);
``flush`` forces them to disk with msync.

Every segment gets its blocks for real before it is mapped (``reserve_blocks``): touching a
mapped page the filesystem cannot back is SIGBUS, which kills the process, so a full disk must
fail the allocation, not the write. A segment that cannot be given its blocks is not created at
all (``SegmentAllocationError``). One found sparse at start (left by an older version) is given
its blocks before it is mapped, or the store does not start and says why: on tmpfs even reading
a hole through a mapping allocates, so no part of a sparse mapping is safe on a full disk.

Consume-queue segments are the exception that proves the rule (``reserve_chunk``): one segment
per queue, most queues near-empty, so each is given blocks a chunk at a time ahead of its write
position (``reserve_to`` before a write passes ``reserved``) and nothing reads or writes past
``reserved``: the hole behind it is never touched through the mapping.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from pathlib import Path

from .disk import free_bytes, human_bytes

log = logging.getLogger(__name__)

_ZERO_CHUNK = bytes(1 << 20)


class SegmentAllocationError(OSError):
    """A segment file could not be given its blocks (the disk is full): nothing was created."""

    def __init__(self, path: Path, size: int, free: int, cause: OSError | None = None) -> None:
        code = cause.errno if cause is not None and cause.errno else errno.ENOSPC
        detail = f": {cause.strerror or cause}" if cause is not None else ""
        need, have = human_bytes(size), human_bytes(free)
        super().__init__(code, f"cannot allocate {need} for {path.name} ({have} free on its disk){detail}")
        self.path = path
        self.size = size
        self.free = free


def reserve_blocks(fd: int, size: int, start: int = 0) -> None:
    """Give the file ``size`` bytes of real blocks (raises OSError, ENOSPC on a full disk).

    Also why segments are fast to write: a sparse mapping makes the kernel allocate a block on the
    first touch of every page (about 2 us per 1 KiB message here); one call that allocates the
    extent up front makes later page faults cheap, and it runs without the GIL. glibc falls back
    to writing each block where the filesystem has no fallocate, so this never leaves holes.
    """
    os.posix_fallocate(fd, start, size)


def reserve_written(fd: int, size: int, start: int) -> None:
    """``reserve_blocks``, then zeros written over them: a chunk of a consume queue. The first
    store through a mapping into a reserved but never written block costs the filesystem an
    extent conversion under its journal (ext4: 2-20 ms measured under load, on the event loop's
    dispatch); into a written one, nothing. Chunks are small, so the zeros are cheap."""
    reserve_blocks(fd, size, start)
    for pos in range(start, start + size, len(_ZERO_CHUNK)):
        os.pwrite(fd, _ZERO_CHUNK[: min(len(_ZERO_CHUNK), start + size - pos)], pos)


def create_reserved_file(path: Path, size: int, reserve: int | None = None) -> int:
    """Create ``path`` with ``size`` bytes of reserved blocks; return its descriptor (read/write).
    With ``reserve``, only that many from its start get blocks; the rest of ``size`` is a hole.

    Free space is checked first (a clear refusal without touching the disk); any failure closes
    and removes what was made and raises ``SegmentAllocationError``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        free = free_bytes(path.parent)
    except OSError as exc:  # a directory needs a block too
        raise SegmentAllocationError(path, size, 0, exc) from exc
    reserve_chunked = reserve is not None
    reserve = size if reserve is None else min(reserve, size)
    if free < reserve:
        raise SegmentAllocationError(path, reserve, free)
    existed = path.exists()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise SegmentAllocationError(path, size, free, exc) from exc
    try:
        if reserve_chunked:  # a consume queue: see reserve_written
            reserve_written(fd, reserve, 0)
        else:
            reserve_blocks(fd, reserve)
        if reserve < size:
            os.ftruncate(fd, size)  # its full length, so it can be mapped; no blocks behind
    except OSError as exc:
        os.close(fd)
        if not existed:
            path.unlink(missing_ok=True)
        raise SegmentAllocationError(path, reserve, free_bytes(path.parent), exc) from exc
    return fd


def is_fully_allocated(fd: int, size: int) -> bool:
    """Whether the file already holds real blocks for ``size`` bytes (no hole to fault on)."""
    st = os.fstat(fd)
    return st.st_size >= size and st.st_blocks * 512 >= size


def open_reserved_file(path: Path, size: int) -> int:
    """Open an existing ``path`` read/write, giving it ``size`` bytes of blocks if it is sparse
    or short (an older version's file); ``SegmentAllocationError`` when the disk has no room."""
    fd = os.open(path, os.O_RDWR)
    if is_fully_allocated(fd, size):
        return fd
    try:
        reserve_blocks(fd, size)
    except OSError as exc:
        os.close(fd)
        raise SegmentAllocationError(path, size, free_bytes(path.parent), exc) from exc
    log.warning("%s was sparse: its blocks are reserved now", path)
    return fd


def reserved_prefix(fd: int, size: int) -> int:
    """How much of a chunk-reserved file (see ``create_reserved_file``) from its start surely
    has blocks: up to its first hole. The filesystem may report reserved but unwritten blocks as
    a hole (tmpfs does): then less than was reserved, never more. A hole with data behind it
    (an older version's sparse file) or no SEEK_HOLE: the whole file is given its blocks."""
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
        if hole >= size:
            return size if is_fully_allocated(fd, size) else _reserve_all(fd, size)
        os.lseek(fd, hole, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # nothing but the hole from there on
            return hole
        return _reserve_all(fd, size)
    return _reserve_all(fd, size)  # data past the hole


def _reserve_all(fd: int, size: int) -> int:
    reserve_blocks(fd, size)
    return size


def _holds_data(fd: int, size: int) -> bool:
    return any(os.pread(fd, len(_ZERO_CHUNK), pos).strip(b"\0") for pos in range(0, size, len(_ZERO_CHUNK)))


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


class MappedFile:
    """One segment: ``file_size`` bytes mapped read/write."""

    def __init__(
        self, path: Path, file_from_offset: int, file_size: int, fd: int, reserve_chunk: int | None = None
    ) -> None:
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        # Bytes from the start with blocks (all of them unless reserved in chunks): nothing
        # reads or writes the mapping past it.
        self.reserve_chunk = reserve_chunk
        self.reserved = file_size
        # The descriptor stays open: fdatasync on it releases the GIL (mmap.flush does not), so
        # writers keep appending while the group-commit thread waits on the disk. On Linux it
        # writes back pages dirtied through the shared mapping as well.
        self._fd = fd
        self._mmap = mmap.mmap(fd, file_size)
        self.view = memoryview(self._mmap)
        self.wrote_position = 0
        self.flushed_position = 0

    @classmethod
    def create(
        cls, path: Path, file_from_offset: int, file_size: int, reserve_chunk: int | None = None
    ) -> MappedFile:
        """A new segment with all its blocks reserved (or its first ``reserve_chunk``);
        ``SegmentAllocationError`` leaves no file."""
        fd = create_reserved_file(path, file_size, reserve_chunk)
        try:
            mapped = cls(path, file_from_offset, file_size, fd, reserve_chunk)
            mapped.reserved = min(file_size, reserve_chunk or file_size)
            return mapped
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise

    @classmethod
    def open(
        cls, path: Path, file_from_offset: int, file_size: int, reserve_chunk: int | None = None
    ) -> MappedFile:
        """An existing segment of ``file_size`` bytes (a short one is extended by the caller);
        one found sparse gets its blocks first (``SegmentAllocationError`` when it cannot), but
        for the hole behind a chunk-reserved one's blocks (``reserved_prefix``)."""
        if reserve_chunk is None:
            fd = open_reserved_file(path, file_size)
            reserved = file_size
        else:
            fd = os.open(path, os.O_RDWR)
            try:
                reserved = reserved_prefix(fd, file_size)
            except OSError as exc:
                os.close(fd)
                raise SegmentAllocationError(path, file_size, free_bytes(path.parent), exc) from exc
        try:
            mapped = cls(path, file_from_offset, file_size, fd, reserve_chunk)
            mapped.reserved = reserved
            return mapped
        except BaseException:
            os.close(fd)
            raise

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.wrote_position

    def reserve_to(self, end: int) -> None:
        """Blocks for the first ``end`` bytes, reserved a chunk ahead, before anything is written
        there (``SegmentAllocationError`` when the disk has no room: nothing changed)."""
        if end <= self.reserved:
            return
        chunk = self.reserve_chunk or self.file_size
        target = min(self.file_size, -(-end // chunk) * chunk)
        try:
            reserve_written(self._fd, target - self.reserved, self.reserved)
        except OSError as exc:
            raise SegmentAllocationError(
                self.path, target - self.reserved, free_bytes(self.path.parent), exc
            ) from exc
        self.reserved = target

    def append(self, data: bytes | bytearray) -> int:
        """Copy ``data`` at the write position; return where it starts (file-relative)."""
        pos = self.wrote_position
        end = pos + len(data)
        self._mmap[pos:end] = data
        self.wrote_position = end
        return pos

    def read(self, pos: int, size: int) -> bytes:
        return self._mmap[pos : pos + size]

    def flush(self) -> int:
        """Make what was written so far durable; return the flushed position."""
        end = self.wrote_position
        if end > self.flushed_position:
            os.fdatasync(self._fd)
            self.flushed_position = end
        return self.flushed_position

    def rewrite(self, pos: int, data: bytes | bytearray) -> None:
        """Overwrite bytes already written and make them durable (purging damaged data only)."""
        if pos + len(data) > self.wrote_position:
            raise ValueError(f"rewrite of {len(data)} bytes at {pos} passes the write position")
        self._mmap[pos : pos + len(data)] = data
        os.fdatasync(self._fd)

    def zero_from(self, pos: int) -> None:
        """Clear stale bytes from ``pos`` until the first all-zero megabyte (recovery only).

        After a torn tail is cut off, leftovers behind the cut must not look like records to a
        later scan; stopping at the first clean chunk avoids touching an untouched sparse tail.
        """
        while pos < self.reserved:  # past it a hole: zeros, never touched through the mapping
            end = min(pos + len(_ZERO_CHUNK), self.reserved)
            chunk = self._mmap[pos:end]
            if chunk == _ZERO_CHUNK[: end - pos]:
                return
            self._mmap[pos:end] = _ZERO_CHUNK[: end - pos]
            pos = end

    def last_modified_ms(self) -> int:
        return int(self.path.stat().st_mtime * 1000)

    def close(self) -> None:
        if self._mmap.closed:
            return
        self.flush()
        os.close(self._fd)
        self.view.release()
        try:
            self._mmap.close()
        except BufferError:
            # A reader still holds a slice of the mapping; the OS unmaps it with the last one.
            pass

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The segments of one log (commit log or a consume queue), oldest first."""

    def __init__(
        self,
        directory: Path | str,
        file_size: int,
        restore_short: bool = False,
        reserve_chunk: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.file_size = file_size
        self.reserve_chunk = reserve_chunk  # see MappedFile.reserved
        # The commit log's: a short segment before the last is extended (recovery quarantines its
        # missing end) instead of refusing to start, as later segments hold acknowledged records.
        self.restore_short = restore_short
        self.files: list[MappedFile] = []
        self._lock = threading.RLock()

    def load(self) -> None:
        """Map the existing segments; wrote positions are set by recovery."""
        if not self.directory.exists():
            return
        paths = [
            path
            for path in sorted(self.directory.iterdir())
            if path.is_file() and path.name.isdigit() and len(path.name) == 20
        ]
        for path in paths:
            size = path.stat().st_size
            if size != self.file_size:
                # A process killed while creating the newest segment leaves it short (often empty):
                # nothing acknowledged can be in it, as a segment is mapped only once it has its
                # full size. It is given its blocks now, or removed when the disk has no room
                # for them. A short or long segment anywhere else is a real mismatch.
                if size > self.file_size or (path != paths[-1] and not self.restore_short):
                    raise ValueError(f"{path} is {size} bytes but segments here are {self.file_size}")
                if path != paths[-1]:
                    self._restore_size(path, size)
                elif not self._complete_interrupted(path, size):
                    continue
            mapped = MappedFile.open(path, int(path.name), self.file_size, self.reserve_chunk)
            mapped.wrote_position = mapped.flushed_position = self.file_size
            self.files.append(mapped)

    def _restore_size(self, path: Path, size: int) -> None:
        """A sealed segment lost its end (a file system repair, a bad copy): later segments hold
        acknowledged records, so it is not a reason to stop. It is given back its size with
        zeros, so every offset stays where it was; recovery finds the missing end where the
        segment's seal should be and quarantines it."""
        log.error("%s is %d of %d bytes: its end is missing; extended with zeros (the missing bytes "
                  "are quarantined as damage)", path, size, self.file_size)  # fmt: skip
        fd = os.open(path, os.O_RDWR)
        try:
            reserve_blocks(fd, self.file_size)
        finally:
            os.close(fd)

    def _complete_interrupted(self, path: Path, size: int) -> bool:
        """Extend a segment whose creation was interrupted; False when it was removed instead."""
        log.warning("%s is %d of %d bytes (creation interrupted); extending it", path, size, self.file_size)
        fd = os.open(path, os.O_RDWR)
        try:
            reserve_blocks(fd, self.file_size)
            return True
        except OSError as exc:
            if _holds_data(fd, size):
                raise SegmentAllocationError(path, self.file_size, free_bytes(path.parent), exc) from exc
            log.warning("%s cannot be extended (%s) and holds nothing: removed", path, exc)
            path.unlink()
            return False
        finally:
            os.close(fd)

    @property
    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create_file(self, start_offset: int, register: bool = True) -> MappedFile:
        """A new segment at ``start_offset`` with its blocks reserved (``SegmentAllocationError``
        when the disk has no room: nothing is created). ``register=False`` leaves adding it to
        the queue (``add``) to the caller, which has something to do first."""
        with self._lock:
            mapped = MappedFile.create(
                self.directory / segment_name(start_offset), start_offset, self.file_size, self.reserve_chunk
            )
            if register:
                self.files.append(mapped)
            return mapped

    def add(self, mapped: MappedFile) -> None:
        with self._lock:
            self.files.append(mapped)

    def last_file_for_write(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full."""
        last = self.last_file
        if last is None:
            return self.create_file(start_offset - start_offset % self.file_size)
        if last.is_full:
            return self.create_file(last.file_from_offset + self.file_size)
        return last

    def find_file(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        # ``last_file`` and its ``end_offset``, inline: every pull reads a queue's end a few times.
        files = self.files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def unflushed_bytes(self) -> int:
        """Written but not yet made durable (RocketMQ's remainHowManyDataToFlush)."""
        return sum(max(0, mapped.wrote_position - mapped.flushed_position) for mapped in list(self.files))

    def flush(self) -> int:
        """Flush every segment with unflushed bytes; return the flushed end offset."""
        with self._lock:
            flushed = 0
            for mapped in self.files:
                if mapped.flushed_position < mapped.wrote_position:
                    mapped.flush()
                flushed = mapped.file_from_offset + mapped.flushed_position
            return flushed

    def truncate_dirty(self, offset: int) -> None:
        """Make ``offset`` the end of the log: later segments go, the one holding it is cut."""
        with self._lock:
            keep: list[MappedFile] = []
            for mapped in self.files:
                if mapped.file_from_offset + self.file_size <= offset:
                    keep.append(mapped)
                elif mapped.file_from_offset <= offset:
                    cut = offset - mapped.file_from_offset
                    mapped.zero_from(cut)
                    mapped.wrote_position = mapped.flushed_position = cut
                    keep.append(mapped)
                else:
                    mapped.destroy()
            self.files = keep

    def delete_first(self, count: int) -> list[MappedFile]:
        """Remove the ``count`` oldest segments (never the last one)."""
        with self._lock:
            count = min(count, len(self.files) - 1)
            removed, self.files = self.files[:count], self.files[count:]
        for mapped in removed:
            mapped.destroy()
        return removed

    def shutdown(self) -> None:
        with self._lock:
            for mapped in self.files:
                mapped.close()

    def destroy(self) -> None:
        with self._lock:
            for mapped in self.files:
                mapped.destroy()
            self.files = []
        if self.directory.exists() and not any(self.directory.iterdir()):
            self.directory.rmdir()
