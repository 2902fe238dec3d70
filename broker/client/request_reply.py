"""Request-reply over messages (RocketMQ 4.6+): ``Producer.request`` and ``create_reply_message``.

The requester stamps the message with a correlation id, its own client id (REPLY_TO_CLIENT) and
the time it will wait (TTL), sends it, and waits for the reply the broker pushes over the
requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT). A responder builds its answer with
``create_reply_message`` and sends it with an ordinary producer; a reply message (MSG_TYPE
``reply``) goes out as SEND_REPLY_MESSAGE.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib

from broker.common import message_const as const
from broker.common.codes import RequestCode, ResponseCode
from broker.common.hosts import parse_host
from broker.common.message import Message, MessageExt
from broker.common.message_codec import string_to_properties
from broker.common.request_headers import ReplyMessageRequestHeader
from broker.common.sysflag import COMPRESSED_FLAG
from broker.common.topic_config import reply_topic
from broker.remoting.command import response_to

from .errors import MQClientError

log = logging.getLogger(__name__)

REPLY_MESSAGE_FLAG = "reply"  # the MSG_TYPE of a reply
CREATE_REPLY_MESSAGE_EXCEPTION = 10007  # RocketMQ's ClientErrorCode


class RequestTimeoutError(MQClientError):
    """The request was sent but no reply came back within the timeout."""


def is_reply(properties: dict[str, str]) -> bool:
    return properties.get(const.PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request``: same correlation id, addressed to the requesting client, in the
    reply topic of the cluster that stored the request."""
    properties = request.properties
    cluster = properties.get(const.PROPERTY_CLUSTER)
    if not cluster:
        raise MQClientError(
            f"create reply message fail, requestMessage error, property[{const.PROPERTY_CLUSTER}] is null.",
            CREATE_REPLY_MESSAGE_EXCEPTION,
        )
    reply = Message(reply_topic(cluster), body)
    reply.put_property(const.PROPERTY_MESSAGE_TYPE, REPLY_MESSAGE_FLAG)
    for name in (
        const.PROPERTY_CORRELATION_ID,
        const.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        const.PROPERTY_MESSAGE_TTL,
    ):
        if name in properties:
            reply.put_property(name, properties[name])
    return reply


class RequestFutureTable:
    """Requests waiting for their reply, by correlation id (one table per client instance)."""

    def __init__(self) -> None:
        self.futures: dict[str, asyncio.Future] = {}

    async def on_reply(self, conn, request):
        """PUSH_REPLY_MESSAGE_TO_CLIENT from a broker."""
        try:
            reply = _reply_from_push(request)
        except (ValueError, zlib.error) as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"unreadable reply message: {exc}")
        correlation_id = reply.properties.get(const.PROPERTY_CORRELATION_ID, "")
        future = self.futures.pop(correlation_id, None)
        if future is None or future.done():
            log.warning("a reply with correlation id %s matches no waiting request", correlation_id)
        else:
            future.set_result(reply)
        return response_to(request)


def _reply_from_push(request) -> MessageExt:
    header = ReplyMessageRequestHeader.from_ext_fields(request.ext_fields)
    properties = string_to_properties(header.properties or "")
    properties[const.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000))
    sys_flag = header.sys_flag
    body = zlib.decompress(request.body) if sys_flag & COMPRESSED_FLAG else bytes(request.body)
    return MessageExt(
        header.topic,
        body,
        header.flag,
        properties,
        queue_id=header.queue_id,
        sys_flag=sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=parse_host(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=parse_host(header.store_host),
        reconsume_times=header.reconsume_times or 0,
    )


def register(instance) -> None:
    """Give a client instance its table of waiting requests and the reply processor."""
    instance.reply_futures = RequestFutureTable()
    instance.remoting.register_processor(
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, instance.reply_futures.on_reply
    )


async def request(producer, msg: Message, timeout_ms: int, **send_options) -> MessageExt:
    """Send ``msg`` and wait for its reply (runs on the client instance's loop)."""
    if timeout_ms <= 0:
        raise MQClientError("the request timeout must be positive", ResponseCode.MESSAGE_ILLEGAL)
    instance = producer.instance
    correlation_id = str(uuid.uuid4())
    msg.put_property(const.PROPERTY_CORRELATION_ID, correlation_id)
    msg.put_property(const.PROPERTY_MESSAGE_REPLY_TO_CLIENT, instance.client_id)
    msg.put_property(const.PROPERTY_MESSAGE_TTL, str(timeout_ms))
    deadline = time.monotonic() + timeout_ms / 1000
    future = asyncio.get_running_loop().create_future()
    table = instance.reply_futures.futures
    table[correlation_id] = future
    try:
        await instance.route(msg.topic)
        await instance.heartbeat_known_brokers()
        await producer.asend(msg, timeout_ms=timeout_ms, **send_options)
        remaining = deadline - time.monotonic()
        try:
            return await asyncio.wait_for(future, max(remaining, 0))
        except TimeoutError:
            raise RequestTimeoutError(
                f"send request message to <{msg.topic}> OK, but wait reply message timeout, {timeout_ms} ms"
            ) from None
    finally:
        table.pop(correlation_id, None)
