"""Start-up recovery: find the true end of the commit log and bring the queues in line.

Verification starts at the checkpoint's flushed commit-log position (Kafka's recovery point):
everything below it was made durable and acknowledged, so it is neither rescanned nor ever cut —
a clean stop rescans nothing. From there on every record is checked (sizes, magic, body CRC);
the first bad one in the last segment marks a torn tail, which is cut off — when nothing sound
follows it. Bad bytes (zeros included) followed by a sound record in the segment, or by a later
segment, are damage, not a tail: they are quarantined (``quarantine``) and no segment is
deleted. A flushed position beyond the log is a garbled checkpoint and is ignored. The seal of
every sealed segment not re-read is checked (a slave copying it stops at anything else). A
checkpoint written before it recorded the flushed position falls back to verifying the last
three segments (clean stop) or from the checkpoint's time (crash).

Re-dispatch then walks the log from where the queues stopped; a record it cannot read there is
quarantined and the walk resumes at the next sound record, so every later record is dispatched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.common.message_codec import MessageDecodeError, decode_message, record_damage
from broker.common.segment_scan import (
    BLANK_END,
    END_OF_DATA,
    UNWRITTEN,
    resume_after,
    segment_end,
    segment_records,
)

from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .mapped_file import MappedFile
from .quarantine import CommitLogQuarantine

log = logging.getLogger(__name__)

# Where a walk may stop in a segment the log has rolled past: its very end, or its blank record.
_SEALED_ENDS = (END_OF_DATA, BLANK_END)
# How much of a sealed segment's end is read at a time looking for its seal (the zeros after
# the blank record are shorter than the largest message).
_SEAL_PROBE = 64 * 1024


def _verified_end(mapped: MappedFile, start: int) -> int:
    """Position after the last record from ``start`` that decodes with a correct body CRC."""
    view = mapped.view
    end = start
    for pos, size in segment_records(view, start, mapped.file_size):
        try:
            decode_message(view, pos, read_body=False, check_crc=True)
        except MessageDecodeError:
            break
        end = pos + size
    return end


def _sealed(mapped: MappedFile) -> bool:
    """Whether the walk of ``mapped``'s records ends at its seal (rare: read once at start)."""
    end = 0
    for pos, size in segment_records(mapped.view, 0, mapped.file_size):
        end = pos + size
    return _is_sealed_at(mapped, end)


def _is_sealed_at(mapped: MappedFile, pos: int) -> bool:
    return segment_end(mapped.view, pos, mapped.file_size) in _SEALED_ENDS


def _first_store_timestamp(mapped: MappedFile) -> int:
    for pos, _ in segment_records(mapped.view, 0, mapped.file_size):
        return decode_message(mapped.view, pos, read_body=False).store_timestamp
    return 0


def recover_commitlog(
    commitlog: CommitLog,
    last_exit_ok: bool,
    checkpoint_min_ts: int,
    flushed_offset: int,
    quarantine: CommitLogQuarantine,
    checkpoint_name: str = "checkpoint",
) -> tuple[int, int]:
    """Set write positions to the verified end of the log and cut a torn tail beyond it.

    Returns ``(end, dispatch_from)``: the log's end and, after a crash, where re-dispatch must
    begin at the latest (the segment of the checkpoint's oldest time, as RocketMQ does).
    """
    files = commitlog.files.files
    if not files:
        return 0, 0
    extent = files[-1].file_from_offset + files[-1].file_size
    if not 0 <= flushed_offset < extent or (flushed_offset == extent and not _sealed(files[-1])):
        # A garbled checkpoint: trusting it would take the unwritten rest of the active segment
        # for data (and then for damage). Verified as with a checkpoint from before the position.
        # The very end of the last file is a place the log was flushed to only when it is sealed.
        log.warning("commit log: the flushed position %d in %s is beyond the log's end %d; ignored",
                    flushed_offset, checkpoint_name, extent)  # fmt: skip
        flushed_offset = 0
    first = max(0, len(files) - 3) if last_exit_ok else _abnormal_start(files, checkpoint_min_ts)
    dispatch_from = files[first].file_from_offset
    scan_from = flushed_offset if flushed_offset > 0 else dispatch_from
    scan_from = max(scan_from, files[0].file_from_offset)
    last_index = len(files) - 1
    for index, mapped in enumerate(files):
        base = mapped.file_from_offset
        if base + mapped.file_size <= scan_from and index < last_index:
            mapped.wrote_position = mapped.flushed_position = mapped.file_size
            check_seal(mapped, quarantine)
            continue
        clean_end = flushed_offset if last_exit_ok and flushed_offset > 0 else -1
        end = _verify_segment(
            mapped, _scan_start(mapped, scan_from), index == last_index, quarantine, clean_end
        )
        if end is None:  # sealed
            mapped.wrote_position = mapped.flushed_position = mapped.file_size
            continue
        valid_end = base + end
        if segment_end(mapped.view, end, mapped.file_size) != UNWRITTEN:
            log.warning("commit log: torn tail after the flushed position %d cut at %d", scan_from, valid_end)
        elif not last_exit_ok:
            log.info("commit log: verified end at %d (flushed position %d)", valid_end, scan_from)
        commitlog.files.truncate_dirty(valid_end)
        return valid_end, min(dispatch_from, valid_end)
    return commitlog.files.max_offset, dispatch_from


def _scan_start(mapped: MappedFile, scan_from: int) -> int:
    """Where verification starts in ``mapped``: the flushed position, when it is where a record
    (or the unwritten rest) begins. A checkpoint written before a slave cut its log back may
    name a position past the data (zeros just before it: no record ends with eight zero bytes,
    its topic comes just before the properties) or inside records written since: then the
    segment is verified whole."""
    start = min(max(0, scan_from - mapped.file_from_offset), mapped.file_size)
    if start == 0 or start >= mapped.file_size:
        return start
    view = mapped.view
    if any(view[start - 8 : start]):
        if segment_end(view, start, mapped.file_size) in (UNWRITTEN, BLANK_END):
            return start
        if record_damage(view, start, mapped.file_from_offset + start) is None:
            return start
    log.warning("commit log: checkpoint's flushed position %d is no record boundary of %s; verified whole",
                scan_from, mapped.path.name)  # fmt: skip
    return 0


def _verify_segment(
    mapped: MappedFile, start: int, is_last: bool, quarantine: CommitLogQuarantine, clean_end: int = -1
) -> int | None:
    """Verify from ``start``; None when the segment ends sealed, else where its data ends.

    In a segment the log has rolled past, bad bytes are damage (later segments hold records):
    they are quarantined and verification resumes after them. In the last segment too when a
    sound record follows them (a crash cuts only the last write); ``clean_end``, where a clean
    stop flushed the log to, spares the search of the unwritten rest after it.
    """
    base = mapped.file_from_offset
    while True:
        end = _verified_end(mapped, start)
        if _is_sealed_at(mapped, end):
            return None
        if is_last and (
            base + end == clean_end or resume_after(mapped.view, end, mapped.file_size, base) is None
        ):
            return end  # a torn tail, or the unwritten rest: nothing sound after it
        damaged = quarantine.report(base + end, "unreadable record found by recovery", at_boundary=True)
        if damaged is None:
            return end
        start = damaged.to_offset - base
        if start >= mapped.file_size:
            return None


def check_seal(mapped: MappedFile, quarantine: CommitLogQuarantine) -> None:
    """A sealed segment must end in its blank record: a slave copying it walks to that record and
    stops for ever at anything else, and no read ever finds it (no message points there). Checked
    at start-up for the segments recovery does not re-read, and when a slave is sent a
    segment's end. The last non-zero bytes are read first (cheap); only when they
    are no blank record reaching the end is the segment walked, quarantining what it meets."""
    last = _last_written(mapped)
    if last >= 8 and segment_end(mapped.view, last - 8, mapped.file_size) == BLANK_END:
        return
    if last and quarantine.covering(mapped.file_from_offset + last - 1) is not None:
        return  # already quarantined up to the end
    _verify_segment(mapped, 0, False, quarantine)


def _last_written(mapped: MappedFile) -> int:
    """Position after the last non-zero byte of the segment (0 when it is all zeros)."""
    view, stop = mapped.view, mapped.file_size
    while stop > 0:
        low = max(0, stop - _SEAL_PROBE)
        kept = len(bytes(view[low:stop]).rstrip(b"\0"))
        if kept:
            return low + kept
        stop = low
    return 0


def _abnormal_start(files: list[MappedFile], checkpoint_min_ts: int) -> int:
    for index in range(len(files) - 1, -1, -1):
        try:
            first_ts = _first_store_timestamp(files[index])
        except ValueError:
            continue
        if 0 < first_ts <= checkpoint_min_ts:
            return index
    return 0


def reput_start(commitlog: CommitLog, queues: list[ConsumeQueue]) -> int:
    """Where re-dispatch begins: the furthest point any consume queue reached.

    Dispatch is sequential, so every record before that point reached its queue; queue puts and
    index builds skip what they already hold, so replaying a little too much is harmless.
    """
    furthest = max((q.max_physic_offset for q in queues), default=0)
    return max(furthest, commitlog.min_offset)


def replay(
    commitlog: CommitLog,
    from_offset: int,
    apply: Callable[[memoryview, int, int], None],
    end: int | None = None,
    quarantine: CommitLogQuarantine | None = None,
) -> int:
    """Call ``apply(view, pos, absolute_offset)`` for every record from ``from_offset`` up to
    ``end`` (the log's end by default, as it stands when the walk begins).

    With a ``quarantine``, quarantined ranges are passed over, and a record that cannot be read
    (a garbled header, or ``apply`` raising ``MessageDecodeError``) in a segment the log has
    rolled past or below ``end`` is quarantined and the walk goes on after it.
    """
    offset = from_offset
    if end is None:
        end = commitlog.max_offset
    while offset < end:
        mapped = commitlog.files.find_file(offset)
        if mapped is None:
            break
        base = mapped.file_from_offset
        if quarantine is not None and (damaged := quarantine.covering(offset)) is not None:
            offset = damaged.to_offset
            continue
        limit = min(mapped.file_size, end - base)
        if quarantine is not None and (next_damage := quarantine.next_start(offset)) is not None:
            limit = min(limit, next_damage - base)
        last, failed = _apply_records(mapped, offset - base, limit, apply)
        if last == limit and limit < min(mapped.file_size, end - base):
            offset = base + last  # stopped before a quarantined range
        elif not failed and mapped.wrote_position >= mapped.file_size and _is_sealed_at(mapped, last):
            offset = base + mapped.file_size
        elif quarantine is not None and base + last < end:
            damaged = quarantine.report(
                base + last, failed or "unreadable record found by re-dispatch", at_boundary=True
            )
            if damaged is None:
                return base + last
            offset = damaged.to_offset
        else:
            return base + last
    return offset


def _apply_records(mapped: MappedFile, start: int, limit: int, apply) -> tuple[int, str]:
    """Apply the records of one segment from ``start``; returns where the walk stopped and, when
    a record failed to decode, why."""
    view, base = mapped.view, mapped.file_from_offset
    last = start
    for pos, size in segment_records(view, start, limit):
        try:
            apply(view, pos, base + pos)
        except MessageDecodeError as exc:
            return pos, f"undecodable record: {exc}"
        last = pos + size
    return last, ""
