"""A broker's epoch list, as RocketMQ 5's controller mode keeps it (EpochFileCache).

Each entry says from which commit-log offset the master of an epoch wrote: ``(epoch, start)``; an
entry ends where the next one starts, the newest is open-ended (``OPEN_END``). A slave rejoining a
master compares the two lists (``find_consistent_point``) to find where their logs stop agreeing,
and cuts its log there (``broker/store/ha/slave.py``).

The file is RocketMQ's ``<storePathRootDir>/epochFileCheckpoint`` in RocketMQ's CheckpointFile
format: the entry count, the CRC32 of the entry lines (0 = unchecked), then ``epoch-startOffset``
lines. Each change is written whole to a temp file, fsynced and renamed over the old one (then
the directory is fsynced), so a crash leaves either the old list or the new one.

A file that cannot be read as such a list (torn by hand, corrupt, hostile: too large, too many
entries, epochs not increasing) is not used: the broker starts with an EMPTY list, logs why, and
keeps the bad file aside as ``epochFileCheckpoint.corrupt``. RocketMQ also goes on with an empty
list. An empty list is the safe side here: a slave without epochs has nothing it can prove it
shares with its master, so its handshake drops its log and copies the master's
(``slave.py``) — never keeps a tail that may have diverged. Refusing to start would instead leave
the operator with a broker that cannot come back without editing files.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

from broker.common.atomic_file import replace_atomically
from broker.common.epoch_entries import MAX_ENTRIES, OPEN_END, EpochEntry

log = logging.getLogger(__name__)

FILE_NAME = "epochFileCheckpoint"  # RocketMQ's, under storePathRootDir
MAX_EPOCH = (1 << 31) - 1  # a Java int
# The longest file a list of MAX_ENTRIES can make (two ints of at most 19 digits per line);
# anything longer is refused before it is read into memory.
MAX_FILE_BYTES = 64 + MAX_ENTRIES * 42


class EpochFileError(ValueError):
    """Entries that cannot form an epoch list (from a file, a peer or a caller)."""


class EpochFile:
    """The epoch list of one broker, persisted at ``path`` on each change. Thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._items: list[tuple[int, int]] = self._load()  # (epoch, start_offset), epochs ascending

    # -- reading ---------------------------------------------------------------------------------
    def span_of(self, offset: int) -> tuple[int, int, int]:
        """(epoch, its start, its end) of the bytes at ``offset``; epoch 0 up to the first entry
        (bytes written before this broker kept epochs)."""
        end = OPEN_END
        for entry in reversed(self.entries()):
            if entry.start_offset <= offset and entry.start_offset < entry.end_offset:
                return entry.epoch, entry.start_offset, entry.end_offset
            if entry.start_offset > offset:
                end = entry.start_offset
        return 0, 0, end

    def entries(self) -> tuple[EpochEntry, ...]:
        with self._lock:
            return as_entries(self._items)

    def last_epoch(self) -> int:
        """The newest epoch (0 with no entry: RocketMQ's epochs start at 1)."""
        with self._lock:
            return self._items[-1][0] if self._items else 0

    def last_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(*self._items[-1]) if self._items else None

    def entry_at(self, offset: int) -> EpochEntry | None:
        """The entry whose range holds ``offset`` (None before the first entry)."""
        return next((e for e in self.entries() if e.start_offset <= offset < e.end_offset), None)

    # -- changing --------------------------------------------------------------------------------
    def append(self, epoch: int, start_offset: int) -> None:
        """The master of ``epoch`` writes from ``start_offset`` on. Entries starting beyond it are
        dropped (they described bytes this log no longer has); the previous one ends there."""
        if not 0 < epoch <= MAX_EPOCH or start_offset < 0:
            raise ValueError(f"epoch {epoch} at offset {start_offset} is out of range")
        with self._lock:
            last = self._items[-1][0] if self._items else 0
            if epoch <= last:
                raise ValueError(f"epoch {epoch} is not above the last epoch {last}")
            items = [item for item in self._items if item[1] <= start_offset]
            items.append((epoch, start_offset))
            self._save(items)

    def truncate_suffix(self, offset: int) -> None:
        """The log was cut at ``offset``: entries starting at or after it go, and the one holding
        the bytes before it is open-ended again (RocketMQ's truncateSuffixByOffset)."""
        with self._lock:
            items = [item for item in self._items if item[1] < offset]
            if items != self._items:
                self._save(items)

    def truncate_prefix(self, offset: int) -> None:
        """The log's segments below ``offset`` were deleted: entries ending at or before it go
        (RocketMQ's truncatePrefixByOffset; the newest, open-ended, always stays)."""
        with self._lock:
            items = self._items
            keep = [item for i, item in enumerate(items) if i + 1 == len(items) or items[i + 1][1] > offset]
            if keep != items:
                self._save(keep)

    def replace_with(self, entries: Iterable[EpochEntry]) -> None:
        """Take another list whole (ends are recomputed from the starts)."""
        items = validated([(e.epoch, e.start_offset) for e in entries])
        with self._lock:
            self._save(items)

    # -- comparing -------------------------------------------------------------------------------
    def find_consistent_point(
        self, other_entries: Iterable[EpochEntry], other_max_offset: int, my_max_offset: int
    ) -> int:
        """Where this log and another stop agreeing (RocketMQ's findConsistentPoint): the newest
        epoch both lists hold with the same start, and the lower of the two ends of it — an
        open end being that side's max offset. -1 when the lists share no epoch."""
        mine = _bounded(self.entries(), my_max_offset)
        theirs = {e.epoch: e for e in _bounded(tuple(other_entries), other_max_offset)}
        for entry in reversed(mine):
            other = theirs.get(entry.epoch)
            if other is not None and other.start_offset == entry.start_offset:
                return min(entry.end_offset, other.end_offset)
        return -1

    # -- the file --------------------------------------------------------------------------------
    def _save(self, items: list[tuple[int, int]]) -> None:
        lines = "".join(f"{epoch}-{start}\n" for epoch, start in items)
        crc = zlib.crc32(lines.encode()) & 0x7FFFFFFF  # RocketMQ's UtilAll.crc32
        replace_atomically(self.path, f"{len(items)}\n{crc}\n{lines}".encode())
        self._items = items

    def _load(self) -> list[tuple[int, int]]:
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.error("epoch file %s unreadable (%s): starting with no epochs", self.path, exc)
            return []
        try:
            return _parse(raw)
        except EpochFileError as exc:
            aside = self.path.with_name(self.path.name + ".corrupt")
            log.error(
                "epoch file %s refused (%s): starting with no epochs (a slave then copies its "
                "master's log whole); the file is kept as %s",
                self.path, exc, aside,
            )  # fmt: skip
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            return []


def validated(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``items`` if they form an epoch list: epochs rising within a Java int, starts never
    falling and not negative, at most MAX_ENTRIES; else EpochFileError."""
    if len(items) > MAX_ENTRIES:
        raise EpochFileError(f"{len(items)} epochs (at most {MAX_ENTRIES})")
    previous = (0, 0)
    for epoch, start in items:
        if not 0 < epoch <= MAX_EPOCH or not 0 <= start < OPEN_END:
            raise EpochFileError(f"epoch {epoch} at offset {start} is out of range")
        if epoch <= previous[0] or start < previous[1]:
            raise EpochFileError(f"epoch {epoch} at {start} follows epoch {previous[0]} at {previous[1]}")
        previous = (epoch, start)
    return list(items)


def _parse(raw: bytes) -> list[tuple[int, int]]:
    if len(raw) > MAX_FILE_BYTES:
        raise EpochFileError(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise EpochFileError("not text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or not all(_is_int(line) for line in lines[:2]):
        raise EpochFileError("no entry count and checksum lines")
    count, crc = int(lines[0]), int(lines[1])
    body = lines[2:]
    if count != len(body):
        raise EpochFileError(f"says {count} entries, holds {len(body)}")
    content = "".join(line + "\n" for line in body)
    if crc != 0 and crc != zlib.crc32(content.encode()) & 0x7FFFFFFF:
        raise EpochFileError("checksum mismatch")
    items = []
    for line in body:
        epoch, sep, start = line.partition("-")
        if not sep or not _is_int(epoch) or not _is_int(start):
            raise EpochFileError(f"line {line[:40]!r} is not epoch-startOffset")
        items.append((int(epoch), int(start)))
    return validated(items)


def _is_int(text: str) -> bool:
    return 0 < len(text) <= 19 and text.isascii() and text.isdigit()


def as_entries(items: list[tuple[int, int]]) -> tuple[EpochEntry, ...]:
    """``(epoch, start)`` pairs as entries, each ending where the next starts."""
    ends = [start for _, start in items[1:]] + [OPEN_END] if items else []
    return tuple(EpochEntry(epoch, start, end) for (epoch, start), end in zip(items, ends, strict=True))


def _bounded(entries: tuple[EpochEntry, ...], max_offset: int) -> tuple[EpochEntry, ...]:
    """The entries a log of ``max_offset`` bytes holds, each ending no further than the log (an
    open end is the log's end); one starting beyond the log describes nothing of it."""
    return tuple(
        EpochEntry(e.epoch, e.start_offset, min(e.end_offset, max_offset))
        for e in entries
        if e.start_offset <= max_offset
    )
