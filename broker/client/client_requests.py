"""Requests brokers send to clients: reset offsets, report running info, consume directly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from broker.common import fastjson
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import (
    CommandHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    HeaderError,
    ResetOffsetRequestHeader,
)
from broker.remoting.command import response_to

H = TypeVar("H", bound=CommandHeader)


def register(instance) -> None:
    remoting = instance.remoting
    remoting.register_processor(
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        _handler(instance, ResetOffsetRequestHeader, lambda h: h.group, _reset_offset),
    )
    remoting.register_processor(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        _handler(instance, GetConsumerRunningInfoRequestHeader, lambda h: h.consumer_group, _running_info),
    )
    remoting.register_processor(
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        _handler(
            instance, ConsumeMessageDirectlyResultRequestHeader, lambda h: h.consumer_group, _consume_directly
        ),
    )


def _handler(instance, header_type: type[H], group_of: Callable[[H], str], action):
    """A processor decoding the request's ``header_type`` and handing it, with the consumer of
    the group it names (``group_of``), to ``action(consumer, header, request)``."""

    async def handle(conn, request):
        try:
            header = header_type.from_ext_fields(request.ext_fields)
        except HeaderError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        consumer = instance.consumers.get(group_of(header))
        if consumer is None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "no consumer of that group in this client")
        return await action(consumer, header, request)

    return handle


async def _reset_offset(consumer, header: ResetOffsetRequestHeader, request):
    """The broker rewrote the group's committed offsets of a topic; its body (ResetOffsetBody)
    holds each of its queues' new offset."""
    await consumer.reset_offsets(header.topic, _reset_table(header.topic, request.body))
    return response_to(request)


def _reset_table(topic: str, body: bytes | None) -> dict[MessageQueue, int]:
    """``offsetTable`` of a ResetOffsetBody (keyed by MessageQueue objects, fastjson's dialect);
    empty when the body has none or is not one (the queues then re-read the broker's offsets)."""
    offsets = {}
    try:
        table = (fastjson.loads(body) or {}).get("offsetTable") if body else None
        for key, offset in (table or {}).items():
            if isinstance(key, tuple):  # an object key, as fastjson writes a MessageQueue
                key = dict(key)
            fields = fastjson.loads(key) if isinstance(key, str) else key
            if fields.get("topic") == topic and fields.get("brokerName"):
                mq = MessageQueue(topic, fields["brokerName"], int(fields.get("queueId", 0)))
                offsets[mq] = int(offset)
    except (ValueError, TypeError, AttributeError):
        return {}
    return offsets


async def _running_info(consumer, header: GetConsumerRunningInfoRequestHeader, request):
    """ConsumerRunningInfo as RocketMQ's clients write it: ``subscriptionSet`` a list of
    SubscriptionData, ``mqTable`` keyed by MessageQueue objects (fastjson's dialect, which Java
    tools and the console read) with each held queue's offset."""
    info = {
        "properties": {
            "consumerGroup": consumer.group,
            "messageModel": consumer.message_model,
            "consumeFromWhere": consumer.consume_from_where,
            "PROP_CONSUMER_START_TIMESTAMP": str(consumer.started_at),
            "PROP_CONSUME_ORDERLY": str(getattr(consumer, "orderly", None) is not None).lower(),
        },
        "subscriptionSet": consumer.consumer_data()["subscriptionDataSet"],
        "statusTable": {},
    }
    queues = [
        (
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
            {"commitOffset": consumer.offsets.read_memory(mq)},
        )
        for mq in sorted(consumer.assigned, key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id))
    ]
    info["mqTable"] = fastjson.ObjectKeyMap(queues)
    return response_to(request, body=fastjson.dumps(info))


async def _consume_directly(consumer, header: ConsumeMessageDirectlyResultRequestHeader, request):
    listener = getattr(consumer, "listener", None)
    if listener is None:
        return response_to(request, ResponseCode.SYSTEM_ERROR, "this consumer has no message listener")
    try:
        msg = decode_message(request.body, decompress_body=True)
    except MessageDecodeError as exc:
        return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
    started = time.monotonic()
    try:
        status = listener([msg], {"direct": True})
        result, remark = (
            (
                "CR_SUCCESS"
                if getattr(status, "value", None) in ("CONSUME_SUCCESS", "SUCCESS")
                else "CR_LATER"
            ),
            None,
        )
    except Exception as exc:
        result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
    body = {
        "order": getattr(consumer, "orderly", None) is not None,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark,
        "spentTimeMills": int((time.monotonic() - started) * 1000),
    }
    return response_to(request, body=fastjson.dumps(body))
