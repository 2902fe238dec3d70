"""Start-up recovery: find the true end of the commit log and bring the queues in line.

After a clean stop the last three segments are verified. After a crash (the ``abort`` file is
still there) verification starts at the segment holding the checkpoint's oldest timestamp.
Every record is checked (sizes, magic, body CRC); the first bad one marks a torn tail, which is
cut off. Consume queues are then trimmed to the log's end and everything the queues and index
may have missed is dispatched again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.segment_scan import BLANK_END, END_OF_DATA, segment_end, segment_records

from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .mapped_file import MappedFile

log = logging.getLogger(__name__)

# Where a walk may stop in a segment the log has rolled past: its very end, or its blank record.
_SEALED_ENDS = (END_OF_DATA, BLANK_END)


def _verified_end(mapped: MappedFile) -> int:
    """Position after the last record of the segment that decodes with a correct body CRC."""
    view = mapped.view
    end = 0
    for pos, size in segment_records(view, 0, mapped.file_size):
        try:
            decode_message(view, pos, read_body=False, check_crc=True)
        except MessageDecodeError:
            break
        end = pos + size
    return end


def _is_sealed_at(mapped: MappedFile, pos: int) -> bool:
    return segment_end(mapped.view, pos, mapped.file_size) in _SEALED_ENDS


def _first_store_timestamp(mapped: MappedFile) -> int:
    for pos, _ in segment_records(mapped.view, 0, mapped.file_size):
        return decode_message(mapped.view, pos, read_body=False).store_timestamp
    return 0


def recover_commitlog(commitlog: CommitLog, last_exit_ok: bool, checkpoint_min_ts: int) -> tuple[int, int]:
    """Set write positions to the verified end of the log and cut what lies beyond.

    Returns ``(end, verified_from)``: the log's end and where verification began (after a
    crash, everything from there is dispatched again, as RocketMQ does).
    """
    files = commitlog.files.files
    if not files:
        return 0, 0
    start = max(0, len(files) - 3) if last_exit_ok else _abnormal_start(files, checkpoint_min_ts)
    verified_from = files[start].file_from_offset
    for mapped in files[:start]:
        mapped.wrote_position = mapped.flushed_position = mapped.file_size
    for mapped in files[start:]:
        end = _verified_end(mapped)
        if _is_sealed_at(mapped, end):
            mapped.wrote_position = mapped.flushed_position = mapped.file_size
            continue
        valid_end = mapped.file_from_offset + end
        if not last_exit_ok:
            log.warning("commit log: verified end at %d after an unclean stop; tail cut there", valid_end)
        commitlog.files.truncate_dirty(valid_end)
        return valid_end, verified_from
    return commitlog.files.max_offset, verified_from


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
) -> int:
    """Call ``apply(view, pos, absolute_offset)`` for every record from ``from_offset`` up to
    ``end`` (the log's end by default, as it stands when the walk begins)."""
    offset = from_offset
    if end is None:
        end = commitlog.max_offset
    while offset < end:
        mapped = commitlog.files.find_file(offset)
        if mapped is None:
            break
        view, base = mapped.view, mapped.file_from_offset
        last = offset - base
        for pos, size in segment_records(view, last, min(mapped.file_size, end - base)):
            apply(view, pos, base + pos)
            last = pos + size
        if mapped.wrote_position >= mapped.file_size and _is_sealed_at(mapped, last):
            offset = base + mapped.file_size
        else:
            offset = base + last
            break
    return offset
