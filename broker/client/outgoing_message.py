"""What a message becomes on the wire: the send request's header and body (checked, compressed
over a size, a half message flagged, a retried message's counters in the header), and lists of
messages cut into batches the broker takes."""

from __future__ import annotations

import time
import zlib

from broker.common import message_const
from broker.common.batch_codec import MAX_BATCH_MESSAGES, encode_batch
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_codec import properties_to_string
from broker.common.message_const import PROPERTY_TRANSACTION_PREPARED
from broker.common.message_id import create_unique_id
from broker.common.request_headers import SendMessageRequestHeader
from broker.common.sysflag import COMPRESSED_FLAG, TRANSACTION_PREPARED_TYPE
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC, is_retry_topic, validate_topic

from .errors import MQClientError

MAX_MESSAGE_SIZE = 4 * 1024 * 1024


def send_header_and_body(
    msg: Message,
    group: str,
    compress_over: int,
    default_topic_queue_nums: int,
    for_batch: bool = False,
) -> tuple[SendMessageRequestHeader, bytes]:
    """The header (its queue id left for each attempt to set) and the body of ``msg``'s send."""
    reason = validate_topic(msg.topic)
    if reason:
        raise MQClientError(reason, ResponseCode.MESSAGE_ILLEGAL)
    if not for_batch and not msg.body:
        raise MQClientError("the message body is empty", ResponseCode.MESSAGE_ILLEGAL)
    if len(msg.body) > MAX_MESSAGE_SIZE:
        raise MQClientError(
            f"the message body is {len(msg.body)} bytes, over {MAX_MESSAGE_SIZE}",
            ResponseCode.MESSAGE_ILLEGAL,
        )
    body, sys_flag = bytes(msg.body), 0
    if not for_batch:
        msg.unique_key = msg.unique_key or create_unique_id()
        if len(body) > compress_over:
            body, sys_flag = zlib.compress(body, 5), COMPRESSED_FLAG
        if msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE  # a half message (TransactionProducer)
    header = SendMessageRequestHeader(
        group,
        msg.topic,
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums,
        -1,  # the queue: set by each attempt
        sys_flag,
        int(time.time() * 1000),
        msg.flag,
        properties_to_string(msg.properties),
        reconsume_times=0,
        unit_mode=False,
        batch=for_batch,
    )
    if is_retry_topic(msg.topic):
        _retry_counters_to_header(msg, header)
    return header, body


def _retry_counters_to_header(msg: Message, header: SendMessageRequestHeader) -> None:
    """As RocketMQ: a message sent back to a retry topic carries its reconsume counters in the
    header (the broker moves it to the DLQ by them), not in its properties."""
    properties = dict(msg.properties)
    reconsume = properties.pop(message_const.PROPERTY_RECONSUME_TIME, None)
    maximum = properties.pop(message_const.PROPERTY_MAX_RECONSUME_TIMES, None)
    if reconsume is not None:
        header.reconsume_times = int(reconsume)
    if maximum is not None:
        header.max_reconsume_times = int(maximum)
    header.properties = properties_to_string(properties)


def split_batches(messages: list[Message], limit: int = MAX_MESSAGE_SIZE) -> list[list[Message]]:
    """Cut a list into batches whose encoded size stays within ``limit`` and that hold at most
    MAX_BATCH_MESSAGES, as the broker takes them (one topic, no delay)."""
    if not messages:
        raise MQClientError("the batch is empty", ResponseCode.MESSAGE_ILLEGAL)
    topic = messages[0].topic
    batches: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for msg in messages:
        if msg.topic != topic:
            raise MQClientError(
                "all messages of a batch must have the same topic", ResponseCode.MESSAGE_ILLEGAL
            )
        if msg.delay_time_level > 0:
            raise MQClientError("delayed messages cannot be batched", ResponseCode.MESSAGE_ILLEGAL)
        item = len(encode_batch([msg])) + 64  # room for the unique id added before sending
        if item > limit:
            raise MQClientError(
                f"a message of {item} bytes exceeds the batch limit {limit}", ResponseCode.MESSAGE_ILLEGAL
            )
        if (size + item > limit or len(current) >= MAX_BATCH_MESSAGES) and current:
            batches.append(current)
            current, size = [], 0
        current.append(msg)
        size += item
    batches.append(current)
    return batches
