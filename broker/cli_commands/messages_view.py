"""Messages as operators read them: RocketMQ's field names, times and hosts spelled out, body as text."""

from __future__ import annotations

from typing import Any

from broker.cli_commands.output import format_millis, render_pairs

_BLOCK_FIELDS = (
    ("OffsetID:", "offset_msg_id"),
    ("MsgId:", "msg_id"),
    ("Topic:", "topic"),
    ("Tags:", "tags"),
    ("Keys:", "keys"),
    ("Queue ID:", "queue_id"),
    ("Queue Offset:", "queue_offset"),
    ("CommitLog Offset:", "commit_log_offset"),
    ("Reconsume Times:", "reconsume_times"),
    ("Born Timestamp:", "born_timestamp"),
    ("Store Timestamp:", "store_timestamp"),
    ("Born Host:", "born_host"),
    ("Store Host:", "store_host"),
    ("System Flag:", "sys_flag"),
    ("Properties:", "properties"),
    ("Message Body:", "body"),
)


def message_block(view: dict[str, Any]) -> str:
    """One message as RocketMQ's queryMsgById prints it: a label per line."""
    pairs = []
    for label, key in _BLOCK_FIELDS:
        value = view.get(key)
        if key in ("born_timestamp", "store_timestamp"):
            value = format_millis(value)
        pairs.append((label, value))
    return render_pairs(pairs)
