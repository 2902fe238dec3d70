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

from broker.common.message_codec import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    decode_message,
    read_record_size,
)

from .commitlog import CommitLog, has_blank_end, scan_segment
from .consume_queue import ConsumeQueue
from .mapped_file import MappedFile

log = logging.getLogger(__name__)


def _validate(view: memoryview, pos: int) -> None:
    decode_message(view, pos, read_body=False, check_crc=True)


def _first_store_timestamp(mapped: MappedFile) -> int:
    _, magic = read_record_size(mapped.view, 0)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        return 0
    return decode_message(mapped.view, 0, read_body=False).store_timestamp


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
        end = 0
        for pos, size in scan_segment(mapped, 0, _validate):
            end = pos + size
        if has_blank_end(mapped, end):
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


def replay(commitlog: CommitLog, from_offset: int, apply: Callable[[memoryview, int, int], None]) -> int:
    """Call ``apply(view, pos, absolute_offset)`` for every record from ``from_offset``."""
    offset = from_offset
    end = commitlog.max_offset
    while offset < end:
        mapped = commitlog.files.find_file(offset)
        if mapped is None:
            break
        start = offset - mapped.file_from_offset
        last = start
        for pos, size in scan_segment(mapped, start, lambda view, pos: None):
            apply(mapped.view, pos, mapped.file_from_offset + pos)
            last = pos + size
        if mapped.wrote_position >= mapped.file_size and has_blank_end(mapped, last):
            offset = mapped.file_from_offset + mapped.file_size
        else:
            offset = mapped.file_from_offset + last
            break
    return offset
