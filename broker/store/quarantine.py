"""Damaged commit-log data: recorded, skipped by every reader, reported, purged only on request.

A record below the flushed position that fails its checks (a read's CRC check, or a walk that
meets a garbled header) was acknowledged and then damaged on disk: cutting the log there would
throw away every intact record after it (what RocketMQ 4.9 does). Instead the byte range from
the damaged record to the next sound one (found by magic code, CRC and stored physical offset)
is quarantined: kept in ``config/damagedCommitLog.json`` (so it survives a restart), logged at
ERROR, shown in runtime info, and passed over by reads and by re-dispatch.

Purging (an operator's ``purgeDamagedCommitLog``) does not delete files or shift offsets: it
overwrites the range with one well-formed filler record (a rolled-back transaction type, so no
consume queue takes it, stored with its own physical offset and CRC) — or with the segment's
blank seal when the range reaches the segment's end. Every walker of the log (recovery,
re-dispatch, the Spark decoder, HA transfer to a slave that has not copied it yet, Apache's own
tools) then passes the range as ordinary records, and the quarantine entry is closed.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from broker.common.json_config_file import JsonConfigFile
from broker.common.message_codec import (
    BLANK,
    LONG,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    PHYSICAL_OFFSET_POSITION,
    encode_blank,
    encode_host,
    encode_record,
    record_damage,
)
from broker.common.segment_scan import next_record_start, segment_records
from broker.common.sysflag import TRANSACTION_ROLLBACK_TYPE

from .commitlog import CommitLog

log = logging.getLogger(__name__)

# Where purged data's filler records say they come from (a topic no consume queue ever holds).
PURGED_TOPIC = b"RMQ_SYS_PURGED_DAMAGED_DATA"
# Runtime info lists at most this many ranges (the counts cover them all).
DETAIL_LIMIT = 20
_FILLER_HOST = encode_host(("127.0.0.1", 0))


class PurgeRefused(ValueError):
    """A purge that would overwrite something other than damaged bytes: nothing was written."""


@dataclass(slots=True)
class DamagedRange:
    from_offset: int  # absolute commit-log offset of the first damaged byte range's record
    to_offset: int  # exclusive: where the next sound record (or the next segment) begins
    segment: str
    reason: str
    found_at: int  # ms
    purged_at: int = 0  # ms; 0 while the range is open

    def to_json(self) -> dict:
        data = {"from": self.from_offset, "to": self.to_offset, "segment": self.segment,
                "reason": self.reason, "foundAt": self.found_at}  # fmt: skip
        if self.purged_at:
            data["purgedAt"] = self.purged_at
        return data

    @classmethod
    def from_json(cls, data: object) -> DamagedRange:
        """Raises ValueError saying what is wrong: the file is edited by hand and never trusted."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        numbers = [data.get(key, 0) for key in ("from", "to", "foundAt", "purgedAt")]
        if any(type(number) is not int for number in numbers):  # bool is no offset either
            raise ValueError("from, to, foundAt and purgedAt must be integers")
        start, stop, found_at, purged_at = numbers
        if not 0 <= start < stop:
            raise ValueError("from must be at least 0 and below to")
        return cls(
            start, stop, str(data.get("segment", "")), str(data.get("reason", "")), found_at, purged_at
        )

    @property
    def size(self) -> int:
        return self.to_offset - self.from_offset


class CommitLogQuarantine:
    def __init__(self, path: Path, commitlog: CommitLog, clock: Callable[[], float] = time.time) -> None:
        self._file = JsonConfigFile(path)
        self._commitlog = commitlog
        self._clock = clock
        self._lock = threading.Lock()
        # (starts, ranges) sorted by from_offset, never overlapping; replaced whole, so readers
        # on other threads never see one list updated without the other.
        self._table: tuple[list[int], list[DamagedRange]] = ([], [])

    def load(self) -> None:
        """Load the ranges; each is checked against the log's bytes first, as the file may have
        been edited by hand: a range that hid or purged sound records would lose them."""
        path = self._file.path
        data = self._file.load()
        if data is None and path.exists() and path.stat().st_size:
            log.error("commit log: %s is no readable JSON object: no damaged range loaded from it", path)
        entries = (data or {}).get("ranges", [])
        parsed: list[DamagedRange] = []
        for item in entries if isinstance(entries, list) else [entries]:
            try:
                parsed.append(DamagedRange.from_json(item))
            except ValueError as exc:
                log.error("commit log: entry %r of %s dropped: %s", item, path, exc)
        kept: list[DamagedRange] = []
        for damaged in sorted(parsed, key=lambda r: r.from_offset):
            if damaged.to_offset <= self._commitlog.min_offset:
                continue  # its segment was deleted by retention: nothing left to say
            problem = self._problem(damaged, kept[-1] if kept else None)
            if problem:
                log.error("commit log: entry %s of %s dropped: %s", damaged.to_json(), path, problem)
            else:
                kept.append(damaged)
        self._set(kept)
        if self._close_filled(kept):
            self._persist()
        for damaged in self.open_ranges():
            log.error(
                "commit log: %d damaged bytes at %d-%d in %s (%s) are still quarantined",
                damaged.size, damaged.from_offset, damaged.to_offset, damaged.segment, damaged.reason,
            )  # fmt: skip

    def _close_filled(self, ranges: list[DamagedRange]) -> bool:
        """Mark purged the open ranges whose bytes hold their filler; whether there were any."""
        closed = False
        for damaged in ranges:
            mapped = self._commitlog.files.find_file(damaged.from_offset)
            if damaged.purged_at or mapped is None:
                continue
            if self._holds_filler(damaged, mapped.view, damaged.from_offset - mapped.file_from_offset):
                damaged.purged_at, closed = int(self._clock() * 1000), True
                log.warning("commit log: damaged bytes %d-%d in %s hold their filler (a purge stopped "
                            "before it was recorded): purged", damaged.from_offset, damaged.to_offset,
                            damaged.segment)  # fmt: skip
        return closed

    def _set(self, ranges: list[DamagedRange]) -> None:
        self._table = ([r.from_offset for r in ranges], ranges)

    @property
    def _ranges(self) -> list[DamagedRange]:
        return self._table[1]

    def drop_beyond(self, end: int) -> None:
        """Recovery found the log's end at ``end``: a range past it names no stored bytes."""
        beyond = [r for r in self._ranges if r.to_offset > end]
        if not beyond:
            return
        for damaged in beyond:
            log.error("commit log: entry %s of %s dropped: it lies past the log's end %d",
                      damaged.to_json(), self._file.path, end)  # fmt: skip
        self._set([r for r in self._ranges if r.to_offset <= end])
        self._persist()

    def _problem(self, damaged: DamagedRange, previous: DamagedRange | None) -> str:
        """Why ``damaged`` names no damaged bytes of this log ('' when it does)."""
        mapped = self._commitlog.files.find_file(damaged.from_offset)
        if mapped is None or damaged.from_offset < self._commitlog.min_offset:
            low, high = self._commitlog.min_offset, self._commitlog.max_offset
            return f"it starts outside the commit log ({low}-{high})"
        base = mapped.file_from_offset
        if damaged.to_offset > min(base + mapped.file_size, self._commitlog.max_offset):
            return f"it runs past the end of segment {mapped.path.name} or of the log"
        if previous is not None and damaged.from_offset < previous.to_offset:
            return f"it overlaps the range {previous.from_offset}-{previous.to_offset}"
        if damaged.purged_at:
            return ""  # filler now: sound by design
        pos, view = damaged.from_offset - base, mapped.view
        if self._holds_filler(damaged, view, pos):
            return ""  # a purge overwrote it, then stopped before saying so: purged
        if record_damage(view, pos, damaged.from_offset) is None:
            return "a sound record starts at its first byte"
        found = next_record_start(view, pos + 1, mapped.file_size, base)
        if found is not None and base + found < damaged.to_offset:
            return f"a sound record starts inside it, at {base + found}"
        return ""

    def _holds_filler(self, damaged: DamagedRange, view: memoryview, pos: int) -> bool:
        """Whether the range's bytes are already what a purge writes (its filler, or the header
        of its seal): a purge killed before it recorded the ranges it had overwritten."""
        replacement = self._replacement(damaged)
        if damaged.to_offset % self._commitlog.file_size == 0:
            return view[pos : pos + BLANK.size] == replacement[: BLANK.size]
        return view[pos : pos + damaged.size] == replacement

    # -- lookups (every read asks; the common answer, no range at all, costs one check) ----------
    def covering(self, offset: int) -> DamagedRange | None:
        """The range (open or purged) holding ``offset``: readers pass over it."""
        starts, ranges = self._table
        if not starts:
            return None
        index = bisect.bisect_right(starts, offset) - 1
        if index >= 0 and offset < ranges[index].to_offset:
            return ranges[index]
        return None

    def next_start(self, offset: int) -> int | None:
        """Where the first range at or after ``offset`` begins (a walk stops before it)."""
        starts = self._table[0]
        index = bisect.bisect_left(starts, offset)
        return starts[index] if index < len(starts) else None

    def open_ranges(self) -> list[DamagedRange]:
        """Ranges not purged whose segment is still there (retention may have deleted it since)."""
        min_offset = self._commitlog.min_offset
        return [r for r in self._ranges if not r.purged_at and r.to_offset > min_offset]

    # -- finding damage ---------------------------------------------------------------------
    def report(self, offset: int, reason: str, at_boundary: bool = False) -> DamagedRange | None:
        """Quarantine the record at commit-log ``offset`` up to the next sound record (and never
        into a range already known). None when the offset is in no segment (retention deleted it
        meanwhile), or when it is no record's start: a consume-queue entry or message id may
        point anywhere, and a range starting inside a sound record would be purged with it.
        ``at_boundary``: the caller's walk of the log stopped there, so it is a start."""
        with self._lock:
            known = self.covering(offset)
            if known is not None:
                return known
            mapped = self._commitlog.files.find_file(offset)
            if mapped is None:
                return None
            base, limit = mapped.file_from_offset, mapped.wrote_position
            if not at_boundary and not _is_record_start(mapped.view, offset - base, limit, base):
                log.warning("commit log: a read asked for a record at %d, where none begins", offset)
                return None
            found = next_record_start(mapped.view, offset - base + 1, limit, base)
            end = base + (found if found is not None else limit)
            following = self.next_start(offset)
            if following is not None and following < end:
                end = following
            damaged = DamagedRange(offset, end, mapped.path.name, reason, int(self._clock() * 1000))
            self._set(sorted([*self._ranges, damaged], key=lambda r: r.from_offset))
            self._persist()
        log.error(
            "commit log: %d damaged bytes at %d-%d in segment %s (%s): quarantined; reads skip them and "
            "every later record stays readable (mqadmin purgeDamagedCommitLog removes them)",
            damaged.size, damaged.from_offset, damaged.to_offset, damaged.segment, reason,
        )  # fmt: skip
        return damaged

    def forget_from(self, offset: int) -> None:
        """The log was cut at ``offset`` (a slave following its master): ranges from there on
        name bytes that are gone, and new records will take those offsets."""
        with self._lock:
            if all(r.to_offset <= offset for r in self._ranges):
                return
            kept = [r for r in self._ranges if r.from_offset < offset]
            for damaged in kept:  # one may straddle the cut: what is left of it stays
                damaged.to_offset = min(damaged.to_offset, offset)
            self._set(kept)
            self._persist()

    # -- the operator's purge -----------------------------------------------------------------
    def purge(self, from_offset: int | None = None) -> list[DamagedRange]:
        """Overwrite open ranges (all, or the one starting at ``from_offset``) with filler and
        close them; returns the ranges purged."""
        with self._lock:
            targets = [r for r in self.open_ranges() if from_offset is None or r.from_offset == from_offset]
            self._check_purgeable(targets)
            now = int(self._clock() * 1000)
            for damaged in targets:
                self._overwrite(damaged)
                damaged.purged_at = now
            # Ranges in segments retention has deleted say nothing any more.
            min_offset = self._commitlog.min_offset
            self._set([r for r in self._ranges if r.to_offset > min_offset])
            if targets:
                self._persist()
        for damaged in targets:
            log.warning("commit log: damaged bytes %d-%d in %s purged (overwritten with filler)",
                        damaged.from_offset, damaged.to_offset, damaged.segment)  # fmt: skip
        return targets

    def _check_purgeable(self, targets: list[DamagedRange]) -> None:
        """The bytes are checked again before anything is overwritten (they may have changed since
        the range was recorded: a restore from a backup); one doubtful range refuses them all."""
        for damaged in targets:
            others = [r for r in self._ranges if r is not damaged and r.from_offset < damaged.from_offset]
            problem = self._problem(damaged, others[-1] if others else None)
            reaches_end = damaged.to_offset % self._commitlog.file_size == 0
            if not problem and damaged.size < (BLANK.size if reaches_end else MIN_RECORD_SIZE):
                problem = f"{damaged.size} bytes cannot hold a filler record"
            if problem:
                raise PurgeRefused(
                    f"damaged range {damaged.from_offset}-{damaged.to_offset} not purged: {problem}; "
                    "nothing was overwritten"
                )

    def _overwrite(self, damaged: DamagedRange) -> None:
        mapped = self._commitlog.files.find_file(damaged.from_offset)
        if mapped is None:
            return  # its segment is gone: nothing left to overwrite
        mapped.rewrite(damaged.from_offset - mapped.file_from_offset, self._replacement(damaged))

    def _replacement(self, damaged: DamagedRange) -> bytes | bytearray:
        """What stands in for a range: one filler record, or the segment's seal when the range
        reaches the segment's end. Its times are the range's ``found_at``, so a purge and every
        HA transfer before it produce the same bytes."""
        size = self._commitlog.file_size
        if damaged.to_offset % size == 0:
            rest = damaged.size
            return encode_blank(rest).ljust(rest, b"\0")
        return filler_record(damaged.from_offset, damaged.size, damaged.found_at)

    def transfer_bytes(self, offset: int, data: bytes) -> bytes:
        """``data`` read at ``offset`` for a slave, open damaged ranges in it replaced as a purge
        would: the slave's walk of what it copies stops for ever at a garbled header otherwise."""
        if not self._table[0] or not data:
            return data
        end = offset + len(data)
        overlapping = [r for r in self.open_ranges() if r.from_offset < end and r.to_offset > offset]
        if not overlapping:
            return data
        patched = bytearray(data)
        for damaged in overlapping:
            low, high = max(offset, damaged.from_offset), min(end, damaged.to_offset)
            replacement = self._replacement(damaged)
            patched[low - offset : high - offset] = replacement[
                low - damaged.from_offset : high - damaged.from_offset
            ]
        return bytes(patched)

    def _persist(self) -> None:
        self._file.persist({"ranges": [r.to_json() for r in self._ranges]})

    # -- reporting ----------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        damaged = self.open_ranges()
        detail = [r.to_json() for r in damaged[:DETAIL_LIMIT]]
        return {
            "commitLogDamagedRanges": str(len(damaged)),
            "commitLogDamagedBytes": str(sum(r.size for r in damaged)),
            "commitLogDamagedDetail": orjson.dumps(detail).decode(),
        }


def _is_record_start(view: memoryview, pos: int, limit: int, base: int) -> bool:
    """Whether a record of the segment begins at ``pos``: its header says so (magic code and the
    physical offset it was stored with, when only its body is damaged), or else a walk of the
    segment's records from its start, resynchronising past damage, lands there (once per
    damaged range: a garbled header cannot say where it began)."""
    size, magic = BLANK.unpack_from(view, pos)
    sound_magic = magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) and size >= MIN_RECORD_SIZE
    if sound_magic and LONG.unpack_from(view, pos + PHYSICAL_OFFSET_POSITION)[0] == base + pos:
        return True
    cursor = 0
    while cursor < pos:
        for record_pos, record_size in segment_records(view, cursor, limit):
            if record_pos >= pos:
                return record_pos == pos
            cursor = record_pos + record_size
        if cursor >= pos:
            break
        found = next_record_start(view, cursor + 1, limit, base)
        if found is None or found > pos:
            # Everything from ``cursor`` on is damaged: the record that begins there is the one to
            # quarantine, and ``pos`` lies after its start.
            return False
        cursor = found
    return cursor == pos


def filler_record(offset: int, size: int, now_ms: int) -> bytearray:
    """A well-formed record of exactly ``size`` bytes stored at ``offset``, taking no queue slot."""
    fixed = MIN_RECORD_SIZE  # every part but body, topic and properties text
    topic = PURGED_TOPIC if size >= fixed + len(PURGED_TOPIC) else b""
    if size < fixed:
        raise ValueError(f"{size} bytes cannot hold a record")
    return encode_record(
        queue_id=0, flag=0, sys_flag=TRANSACTION_ROLLBACK_TYPE, born_timestamp=now_ms,
        born_host=_FILLER_HOST, store_host=_FILLER_HOST, body=bytes(size - fixed - len(topic)),
        topic=topic, properties=b"", physical_offset=offset, store_timestamp=now_ms,
    )  # fmt: skip
