"""What a broker's answer to a send means to the producer, as RocketMQ's client reads it.

SUCCESS and the "stored, but ..." codes are a result with a status (RocketMQ's SendStatus:
FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE): the message is stored, the send
is not retried (RocketMQ retries those only with retryAnotherBrokerWhenNotStoreOK, off by
default). Any other code is an error, tried again on another broker when it is one of RocketMQ's
retryResponseCodes, as is a network failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_queue import MessageQueue

from .client_api import send_answer
from .errors import MQBrokerError, MQClientError


@dataclass(frozen=True)
class SendResult:
    send_status: str
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int


# The answers that are results, each with its SendStatus (MQClientAPIImpl.processSendResponse).
SEND_STATUS = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}

# DefaultMQProducer's retryResponseCodes (its GO_AWAY is a proxy's code this broker never sends).
RETRYABLE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def send_result(response, mq: MessageQueue, msg_id: str) -> SendResult:
    """The result of an answer whose code is one of ``SEND_STATUS``."""
    answer = send_answer(response.ext_fields)
    return SendResult(
        SEND_STATUS.get(response.code, "SEND_OK"),
        msg_id,
        answer.msg_id,
        MessageQueue(mq.topic, mq.broker_name, answer.queue_id),
        answer.queue_offset,
    )


def retryable(error: Exception) -> bool:
    """Worth another broker: a network failure or one of the broker codes RocketMQ retries."""
    return not isinstance(error, MQBrokerError) or error.response_code in RETRYABLE_CODES


def send_failed(msg: Message, last_error: Exception | None) -> MQClientError:
    # The last broker's code stays readable (e.g. TOPIC_NOT_EXIST when auto-creation is off).
    code = last_error.response_code if isinstance(last_error, MQClientError) else -1
    error = MQClientError(f"send to {msg.topic} failed after retries: {last_error}", code)
    error.__cause__ = last_error
    return error
