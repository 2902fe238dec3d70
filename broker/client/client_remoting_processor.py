"""Requests brokers send to a client (RocketMQ's ClientRemotingProcessor).

NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance service; RESET_CONSUMER_CLIENT_OFFSET moves an
online consumer to the offsets an operator chose; GET_CONSUMER_STATUS_FROM_CLIENT,
GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY let operators look inside a consumer.
Bodies keyed by message queues are written the way fastjson writes Java maps (object keys).
"""

from __future__ import annotations

import logging

import orjson

from broker.common import request_headers as rh
from broker.common.message_codec import MessageDecodeError, decode_message
from broker.remoting import fastjson
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, response_to

from .message_queue import MessageQueue

log = logging.getLogger(__name__)


def register(instance) -> None:
    processor = ClientRemotingProcessor(instance)
    for code, handler in (
        (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, processor.notify_consumer_ids_changed),
        (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, processor.reset_offset),
        (RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, processor.get_consumer_status),
        (RequestCode.GET_CONSUMER_RUNNING_INFO, processor.get_consumer_running_info),
        (RequestCode.CONSUME_MESSAGE_DIRECTLY, processor.consume_message_directly),
    ):
        instance.remoting.register_processor(code, handler)


def mq_map(table: dict[MessageQueue, object]) -> bytes:
    return fastjson.dumps_object_key_map([(mq.to_json(), value) for mq, value in sorted(table.items())])


def parse_mq_map(raw: dict) -> dict[MessageQueue, int]:
    """``{MessageQueue: offset}`` from fastjson's object-keyed map (keys parsed as pairs)."""
    table = {}
    for key, value in (raw or {}).items():
        fields = dict(key) if isinstance(key, tuple) else orjson.loads(key)
        table[MessageQueue.from_json(fields)] = int(value)
    return table


class ClientRemotingProcessor:
    def __init__(self, instance) -> None:
        self.instance = instance

    def _consumer(self, group: str | None):
        return self.instance.consumer_table.get(group or "")

    async def notify_consumer_ids_changed(self, conn, request: RemotingCommand):
        log.info("%s: the members of %s changed; rebalancing now", self.instance.client_id,
                 request.field("consumerGroup"))  # fmt: skip
        self.instance.rebalance_immediately()
        return None

    async def reset_offset(self, conn, request: RemotingCommand):
        header = rh.ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumer(header.group)
        if consumer is not None and request.body:
            table = parse_mq_map((fastjson.loads(request.body) or {}).get("offsetTable"))
            await consumer.reset_offset(header.topic, table)
        return None

    async def get_consumer_status(self, conn, request: RemotingCommand):
        header = rh.GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumer(header.group)
        table = consumer.offset_table_of(header.topic) if consumer is not None else {}
        return response_to(request, body=b'{"messageQueueTable":' + mq_map(table) + b"}")

    async def get_consumer_running_info(self, conn, request: RemotingCommand):
        header = rh.GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumer(header.consumer_group)
        if consumer is None:
            reason = f"The Consumer Group <{header.consumer_group}> not exist in this consumer"
            return response_to(request, ResponseCode.SYSTEM_ERROR, reason)
        info = consumer.running_info()
        mq_table = info.pop("mqTable")
        body = orjson.dumps(info)[:-1] + b',"mqTable":' + mq_map(mq_table) + b"}"
        return response_to(request, body=body)

    async def consume_message_directly(self, conn, request: RemotingCommand):
        header = rh.ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self._consumer(header.consumer_group)
        if consumer is None or not hasattr(consumer, "consume_message_directly"):
            reason = f"no consumer of {header.consumer_group} here"
            return response_to(request, ResponseCode.SYSTEM_ERROR, reason)
        try:
            msg = decode_message(request.body, decompress_body=True)
        except MessageDecodeError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return response_to(request, body=orjson.dumps(result))
