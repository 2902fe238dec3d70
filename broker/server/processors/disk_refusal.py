"""The refusal of a change to the broker's own tables (topics, groups, consumer offsets) on a full disk.

Answered as a put is on a full disk: SERVICE_NOT_AVAILABLE (14) and RocketMQ's "the broker's disk is
full [CL: …]" remark with the reason. The code says what it is — this broker cannot keep writes
now, and will again by itself once space returns — where SYSTEM_ERROR would read as a fault of the
request or of the broker; RocketMQ's clients retry another broker on it, and mqadmin and the SDK show
the remark. A change answered SUCCESS is one the broker kept: topics and groups are written before
they are acknowledged; offsets, written every flushConsumerOffsetInterval as RocketMQ's, are refused
while the disk guard finds the disk full (at diskSpaceWarningLevelRatio, before the disk is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.common.codes import ResponseCode
from broker.common.json_config_file import JsonConfigFile
from broker.remoting.command import RemotingCommand, response_to

if TYPE_CHECKING:
    from broker.store.message_store import MessageStore


def disk_full_refusal(store: MessageStore, request: RemotingCommand) -> RemotingCommand | None:
    """SERVICE_NOT_AVAILABLE while the store refuses writes for a full disk, else None."""
    remark = store.disk_full_refusal()
    return response_to(request, ResponseCode.SERVICE_NOT_AVAILABLE, remark) if remark else None


def not_created(store: MessageStore, request: RemotingCommand, what: str) -> RemotingCommand:
    """The refusal of a write that needs ``what`` (a topic or group made on first use), not created
    because it could not be written (see TopicConfigManager.disk_full)."""
    cause = "" if store.disk_full() else f"{what} could not be created"
    return response_to(request, ResponseCode.SERVICE_NOT_AVAILABLE, store.disk_full_refusal(cause))


def not_written(store: MessageStore, request: RemotingCommand, file: JsonConfigFile) -> RemotingCommand:
    """The refusal of a change whose table ``file`` could not be written (the change was undone)."""
    cause = f"{file.path.name} could not be written: {file.last_error}"
    return response_to(request, ResponseCode.SERVICE_NOT_AVAILABLE, store.disk_full_refusal(cause))
