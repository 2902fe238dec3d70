"""Issue 31 §2 (minor): a write refused for a controller-mode reason (no role yet, a silent
master, an unbound HA port: NOT_WRITEABLE) says that reason first and only. Before, the remark
opened with RocketMQ's generic "the broker's disk is full [...], messages are put to the slave,
message store has been shut down, etc." and gave the real reason last, in parentheses."""

from __future__ import annotations

from broker.common.message import MessageExt
from broker.store.results import PutMessageStatus
from broker.store.running_flags import DISK_FULL, NOT_WRITEABLE

REASON = "the controller has not been heard from and this master is alone in its in-sync set"


def _message() -> MessageExt:
    return MessageExt(topic="orders", body=b"refused", born_timestamp=1, born_host=("10.0.0.9", 4000))


def test_a_controller_mode_refusal_gives_its_reason_alone(open_store):
    store = open_store()
    store.running_flags.set(NOT_WRITEABLE, REASON)
    refused = store.put_message(_message())
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert refused.remark == f"service not available now: {REASON}", refused.remark
    assert "disk is full" not in refused.remark
    assert store.max_physic_offset == 0  # nothing written


def test_a_full_disk_as_well_keeps_rocketmqs_remark_with_both_reasons(open_store):
    store = open_store()
    store.running_flags.set(NOT_WRITEABLE, REASON)
    store.running_flags.set(DISK_FULL, "the disk is 99% used")
    refused = store.put_message(_message())
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "the broker's disk is full" in refused.remark and REASON in refused.remark, refused.remark
    store.running_flags.clear(DISK_FULL)
    store.running_flags.clear(NOT_WRITEABLE)
    assert store.put_message(_message()).ok
