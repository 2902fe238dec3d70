"""SEND_REPLY_MESSAGE (324) / V2 (325): a responder's reply, pushed to the requesting client.

The reply carries the requester's client id (REPLY_TO_CLIENT). The broker pushes it over that
client's own connection with PUSH_REPLY_MESSAGE_TO_CLIENT (326) and, as RocketMQ does with
``storeReplyMessageEnable``, also stores it in ``<cluster>_REPLY_TOPIC``. A requester this
broker does not know (no heartbeat from it) makes the push fail with SYSTEM_ERROR, as in
RocketMQ even when the reply was stored.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import MessageExt
from broker.common.message_codec import properties_to_string
from broker.common.request_headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_send_request,
)
from broker.remoting.command import RemotingCommand, create_request, response_to

from .send import send_refusal, single_message

if TYPE_CHECKING:
    from ..controller import BrokerController

log = logging.getLogger(__name__)

PUSH_REPLY_TIMEOUT_MS = 3000


def ensure_reply_topic(broker: BrokerController) -> None:
    """The broker creates its cluster's reply topic at start (one queue), as RocketMQ's does."""
    broker.topics.ensure(tc.reply_topic(broker.config.broker_cluster_name), 1, tc.PERM_READ | tc.PERM_WRITE)


class ReplyProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def send_reply(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_send_request(request.ext_fields)
        topic = header.topic
        # As RocketMQ's msgCheck: a bad name is SYSTEM_ERROR (TopicValidator.validateTopic).
        refused = send_refusal(request, header, ResponseCode.SYSTEM_ERROR)
        if refused is not None:
            return refused
        config = self.broker.topics.get(topic)
        if config is None:
            return response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        queue_id = header.queue_id  # -1 when left out: the first queue
        if not 0 <= queue_id < config.write_queue_nums:
            queue_id = 0
        msg = single_message(request, header, topic, queue_id, conn)
        pushed, remark = await self._push(header, msg)
        code = ResponseCode.SUCCESS if pushed else ResponseCode.SYSTEM_ERROR
        fields = SendMessageResponseHeader("", queue_id, 0)  # msgId and queueOffset: once stored
        if self.broker.config.store_reply_message_enable:
            result = await self.broker.store.put_messages_async([msg])
            if result.append is None:
                return response_to(request, ResponseCode.SYSTEM_ERROR, result.remark or result.status.value)
            fields.msg_id, fields.queue_offset = result.append.msg_id, result.append.logics_offset
        # As RocketMQ (4.9 and 5): a reply that could not be pushed is SYSTEM_ERROR with the reason,
        # stored or not; the requester may still find a stored one in the reply topic.
        return response_to(request, code, remark, fields)

    async def _push(self, header: SendMessageRequestHeader, msg: MessageExt) -> tuple[bool, str | None]:
        sender = msg.properties.get(const.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if not sender:
            return False, f"reply message properties[{const.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = self._producer_channel(sender)
        if channel is None:
            return False, f"push reply message fail, channel of <{sender}> not found."
        properties = {**msg.properties, const.PROPERTY_PUSH_REPLY_TIME: str(int(time.time() * 1000))}
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=msg.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=msg.queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            flag=msg.flag,
            born_host=f"{msg.born_host[0]}:{msg.born_host[1]}",
            store_host=self.broker.config.broker_addr,
            store_timestamp=int(time.time() * 1000),
            properties=properties_to_string(properties),
            reconsume_times=msg.reconsume_times,
            unit_mode=bool(header.unit_mode),
        )
        push = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, push_header, msg.body)
        try:
            response = await channel.connection.invoke(push, PUSH_REPLY_TIMEOUT_MS)
        except Exception as exc:
            log.warning("pushing a reply to %s failed: %s", sender, exc)
            return False, f"push reply message to {sender} fail: {exc}"
        if response.code != ResponseCode.SUCCESS:
            return False, f"push reply message to {sender} fail: {response.remark}"
        return True, None

    def _producer_channel(self, client_id: str | None):
        if not client_id:
            return None
        for channels in list(self.broker.producers.groups.values()):
            channel = channels.get(client_id)
            if channel is not None and getattr(channel.connection, "is_open", False):
                return channel
        return None
