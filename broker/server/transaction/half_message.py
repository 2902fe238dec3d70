"""How a transactional message changes shape: half message, final message, op record, discard.

Everything about a transaction lives in topics, as in RocketMQ: the half message in
``RMQ_SYS_TRANS_HALF_TOPIC`` (its real topic and queue in properties), one op record per resolved
half message in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (body = the half message's queue offset, tag
``d``), and the checker's progress as consumer offsets of the system group ``CID_RMQ_SYS_TRANS``.
"""

from __future__ import annotations

import time

from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.sysflag import TRANSACTION_NOT_TYPE, reset_transaction_value
from broker.common.topic_config import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

REMOVE_TAG = "d"
HALF_QUEUE_ID = 0


def is_half_request(msg: MessageExt) -> bool:
    return msg.properties.get(const.PROPERTY_TRANSACTION_PREPARED) == "true"


def to_half_message(msg: MessageExt) -> None:
    """Park ``msg`` in the half topic; it stays invisible to consumers until committed.

    The prepared flag is cleared from ``sysFlag`` so the half topic's consume queue indexes it
    (the checker reads it from there); TRAN_MSG in the properties still marks it."""
    msg.properties[const.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[const.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.sys_flag = reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE)
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, HALF_QUEUE_ID


def final_message(half: MessageExt, transaction_type: int, half_commitlog_offset: int) -> MessageExt:
    """The message a commit publishes: real topic and queue back, transaction type set."""
    props = dict(half.properties)
    topic = props.pop(const.PROPERTY_REAL_TOPIC, "")
    queue_id = int(props.pop(const.PROPERTY_REAL_QUEUE_ID, "0") or 0)
    props[const.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return half.copy_for_store(
        topic,
        queue_id,
        props,
        sys_flag=reset_transaction_value(half.sys_flag, transaction_type),
        prepared_transaction_offset=half_commitlog_offset,
    )


def op_message(half_queue_offset: int, host: tuple[str, int]) -> MessageExt:
    """The record saying "the half message at this queue offset is resolved"."""
    msg = MessageExt(
        TRANS_OP_HALF_TOPIC,
        str(half_queue_offset).encode(),
        queue_id=HALF_QUEUE_ID,
        born_timestamp=int(time.time() * 1000),
        born_host=host,
    )
    msg.tags = REMOVE_TAG
    msg.wait_store_msg_ok = False
    return msg


def renewed_half_message(half: MessageExt, check_times: int) -> MessageExt:
    """A copy of ``half`` appended again so the check count is stored (RocketMQ's putBackHalfMsg)."""
    props = dict(half.properties)
    props[const.PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
    props[const.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return half.copy_for_store(TRANS_HALF_TOPIC, HALF_QUEUE_ID, props)


def check_max_message(half: MessageExt) -> MessageExt:
    """What is kept of a half message nobody resolved within ``transactionCheckMax`` checks."""
    return half.copy_for_store(TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(half.properties))


def check_times(half: MessageExt) -> int:
    try:
        return int(half.properties.get(const.PROPERTY_TRANSACTION_CHECK_TIMES, "0") or 0)
    except ValueError:
        return 0


def immunity_ms(half: MessageExt, transaction_timeout_ms: int) -> int:
    """How old a half message must be before it is checked (CHECK_IMMUNITY_TIME_IN_SECONDS wins)."""
    raw = half.properties.get(const.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    try:
        return int(raw) * 1000 if raw else transaction_timeout_ms
    except ValueError:
        return transaction_timeout_ms
