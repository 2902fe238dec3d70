"""Every remote call of the SDK in one place: typed request headers in, typed results out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

import orjson

from broker.common import fastjson
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import decode_intact_messages, properties_to_string, string_to_properties
from broker.common.message_const import PROPERTY_MESSAGE_TYPE
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import (
    CommandHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetRouteInfoRequestHeader,
    HeaderError,
    LockBatchRequestBody,
    LockBatchResponseBody,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnlockBatchRequestBody,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.common.route import TopicRouteData
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request

from .errors import MQBrokerError, MQClientError

H = TypeVar("H", bound=CommandHeader)

log = logging.getLogger(__name__)

_PULL_ANSWERS = (
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)
_REPLY = "reply"  # the MSG_TYPE of a reply message
_REPLY_MARK = properties_to_string({PROPERTY_MESSAGE_TYPE: _REPLY})  # as it appears in the header


def _checked(response: RemotingCommand, addr: str, allowed: tuple[int, ...] = (ResponseCode.SUCCESS,)):
    if response.code not in allowed:
        raise MQBrokerError(response.code, response.remark, addr)
    return response


def _intact_messages(body: bytes | None, addr: str) -> list:
    """A pull answer's messages, each checked against its body CRC on receipt: damaged ones
    (on the broker's disk or on the way) are reported and left out, never consumed as intact."""
    messages, damaged = decode_intact_messages(body or b"", decompress_body=True)
    for problem in damaged:
        log.error("a message pulled from %s is damaged and was not delivered: %s", addr, problem)
    return messages


def answer_header(cls: type[H], response: RemotingCommand, server: str) -> H:
    """The header of a server's answer as a ``cls``. An answer lacking a field the server must
    send, or carrying a number that does not parse, raises ``MQClientError`` naming ``server``
    ("broker 10.0.0.1:10911", or the address alone) and the field, not a bare ``HeaderError``
    whose text speaks of a request."""
    try:
        return cls.from_ext_fields(response.ext_fields)
    except HeaderError as exc:
        if exc.field is None:
            raise MQClientError(f"{server} sent an unreadable answer ({exc})") from None
        if exc.value:
            detail = f"with the header field {exc.field!r}={exc.value!r}, which is not a number"
        else:
            detail = f"without the header field {exc.field!r}"
        raise MQClientError(f"{server} answered {detail}") from None


def send_fields(header: SendMessageRequestHeader) -> dict[str, str]:
    """The header's ``extFields``, as ``header.to_ext_fields()`` writes them (same names, order
    and text) spelled out: this runs once per send, where the generic encoder, which looks
    each field's name and kind up, cost 1.5 us more."""
    fields = {
        "producerGroup": header.producer_group,
        "topic": header.topic,
        "defaultTopic": header.default_topic,
        "defaultTopicQueueNums": str(header.default_topic_queue_nums),
        "queueId": str(header.queue_id),
        "sysFlag": str(header.sys_flag),
        "bornTimestamp": str(header.born_timestamp),
        "flag": str(header.flag),
    }
    if header.properties is not None:
        fields["properties"] = header.properties
    if header.reconsume_times is not None:
        fields["reconsumeTimes"] = str(header.reconsume_times)
    if header.unit_mode is not None:
        fields["unitMode"] = "true" if header.unit_mode else "false"
    if header.batch is not None:
        fields["batch"] = "true" if header.batch else "false"
    if header.max_reconsume_times is not None:
        fields["maxReconsumeTimes"] = str(header.max_reconsume_times)
    return fields


def send_answer(fields: dict[str, str]) -> SendMessageResponseHeader:
    """A send's response header, read field by field as ``from_ext_fields`` would (once per
    send, where the generic decoder cost 1 us more); an answer lacking a field, or with a number
    that does not parse, goes through ``from_ext_fields`` for its ``HeaderError``."""
    try:
        return SendMessageResponseHeader(
            fields["msgId"],
            int(fields["queueId"]),
            int(fields["queueOffset"]),
            fields.get("transactionId"),
            fields.get("MSG_REGION"),
            fields.get("TRACE_ON"),
        )
    except (KeyError, ValueError):
        return SendMessageResponseHeader.from_ext_fields(fields)


def send_request(header: SendMessageRequestHeader, body: bytes, oneway: bool = False) -> RemotingCommand:
    """SEND_MESSAGE, SEND_BATCH_MESSAGE, or SEND_REPLY_MESSAGE for a reply (MSG_TYPE=reply), which
    the broker pushes to the requester.

    With the V1 header (full field names), not the V2 one RocketMQ's Java client sends by
    default: the broker renames a V2 header's fields before use, which measured 1.4-2.2 us more
    per send in bench/broker_path.py and 5-10 us more end to end at p50. The broker's V2 path is
    exercised by ali-ons (tests/compat) and the broker's own tests."""
    properties = header.properties or ""
    if _REPLY_MARK in properties and string_to_properties(properties).get(PROPERTY_MESSAGE_TYPE) == _REPLY:
        code = RC.SEND_REPLY_MESSAGE
    else:
        code = RC.SEND_BATCH_MESSAGE if header.batch else RC.SEND_MESSAGE
    return create_request(code, send_fields(header), body, oneway=oneway)


class ClientAPI:
    def __init__(self, remoting: RemotingClient) -> None:
        self.remoting = remoting

    async def invoke(
        self,
        addr: str,
        code: int,
        header: CommandHeader | None = None,
        body: bytes | None = None,
        timeout_ms: int = 3000,
        allowed: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Any request: ``code`` with a typed ``header`` and a ``body``, answered within
        ``timeout_ms``. A response whose code is not in ``allowed`` raises ``MQBrokerError`` (its
        code, remark and ``addr``), the one check every request of the SDK and the admin goes
        through; the caller reads a typed response header with ``answer_header(X, r, addr)``."""
        fields = header.to_ext_fields() if header is not None else None
        request = create_request(code, fields, body or b"")
        return _checked(await self.remoting.invoke(addr, request, timeout_ms), addr, allowed)

    async def invoke_oneway(
        self, addr: str, code: int, header: CommandHeader, remark: str | None = None
    ) -> None:
        """A request nobody answers (returns once it is written or queued for writing)."""
        request = create_request(code, header.to_ext_fields(), oneway=True)
        request.remark = remark
        await self.remoting.invoke_oneway(addr, request)

    async def topic_route(self, namesrv: str, topic: str, timeout_ms: int = 3000) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; None for a topic the name server does not know."""
        response = await self.invoke(
            namesrv,
            RC.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic),
            timeout_ms=timeout_ms,
            allowed=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return TopicRouteData.from_json(topic, fastjson.loads(response.body))

    async def send(
        self, addr: str, header: SendMessageRequestHeader, body: bytes, timeout_ms: int
    ) -> RemotingCommand:
        return _checked(await self.remoting.invoke(addr, send_request(header, body), timeout_ms), addr)

    async def send_oneway(self, addr: str, header: SendMessageRequestHeader, body: bytes) -> None:
        await self.remoting.invoke_oneway(addr, send_request(header, body, oneway=True))

    async def pull(
        self,
        addr: str,
        header: PullMessageRequestHeader,
        timeout_ms: int,
        on_found: Callable[[list], None],
    ) -> tuple[int, PullMessageResponseHeader]:
        """PULL_MESSAGE: the response's code and header. The messages found go to
        ``on_found`` while the answer is being read, not when the caller resumes: that would be
        a turn of the loop later, and through every coroutine waiting on this one, in the path
        of each message a consumer receives. Once the caller stopped waiting (cancelled: its
        queue went to another member), an answer is dropped."""
        connection = await self.remoting.connection(addr)
        answered = asyncio.get_running_loop().create_future()

        def on_answer(response: RemotingCommand | None, error: Exception | None) -> None:
            if answered.done():
                return
            try:
                if error is not None:
                    raise error
                assert response is not None  # the remoting layer gives one or the other
                _checked(response, addr, _PULL_ANSWERS)
                fields = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
                if response.code == ResponseCode.SUCCESS:
                    on_found(_intact_messages(response.body, addr))
            except Exception as exc:
                answered.set_exception(exc)
            else:
                answered.set_result((response.code, fields))

        connection.invoke_with_callback(
            create_request(RC.PULL_MESSAGE, header.to_ext_fields()), timeout_ms, on_answer
        )
        return await answered

    async def heartbeat(self, addr: str, data: dict) -> None:
        await self.invoke(addr, RC.HEART_BEAT, body=orjson.dumps(data))

    async def unregister(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        """UNREGISTER_CLIENT; its answer is not checked (the client is going away)."""
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self.remoting.invoke(addr, create_request(RC.UNREGISTER_CLIENT, header.to_ext_fields()), 3000)

    async def consumer_ids(self, addr: str, group: str) -> list[str]:
        """The group's members known to that broker; none when it refuses (no such group)."""
        header = GetConsumerListByGroupRequestHeader(group)
        response = await self.remoting.invoke(
            addr, create_request(RC.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields())
        )
        if response.code != ResponseCode.SUCCESS:
            return []
        return list(fastjson.loads(response.body).get("consumerIdList") or [])

    async def query_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset of the queue; -1 when it has none."""
        response = await self.invoke(
            addr,
            RC.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(group, topic, queue_id),
            allowed=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        offset = answer_header(QueryConsumerOffsetResponseHeader, response, addr).offset
        return -1 if offset is None else offset

    async def update_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        await self.invoke_oneway(addr, RC.UPDATE_CONSUMER_OFFSET, header)

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET: the queue's next offset to be written."""
        response = await self.invoke(addr, RC.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic, queue_id))
        return answer_header(GetMaxOffsetResponseHeader, response, addr).offset

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the queue's first offset stored at or after ``timestamp``."""
        header = SearchOffsetRequestHeader(topic, queue_id, timestamp)
        response = await self.invoke(addr, RC.SEARCH_OFFSET_BY_TIMESTAMP, header)
        return answer_header(SearchOffsetResponseHeader, response, addr).offset

    async def send_back(
        self, addr: str, header: ConsumerSendMsgBackRequestHeader, timeout_ms: int = 3000
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-delivers the message later (or dead-letters it)."""
        await self.invoke(addr, RC.CONSUMER_SEND_MSG_BACK, header, timeout_ms=timeout_ms)

    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None
    ) -> None:
        """END_TRANSACTION, oneway as RocketMQ's producers send it (the broker answers nothing)."""
        await self.invoke_oneway(addr, RC.END_TRANSACTION, header, remark)

    async def check_client_config(self, addr: str, client_id: str, group: str, subscription: dict) -> None:
        """CHECK_CLIENT_CONFIG: raises ``MQBrokerError`` (SUBSCRIPTION_PARSE_FAILED, …) when refused."""
        body = {"clientId": client_id, "group": group, "subscriptionData": subscription}
        await self.invoke(addr, RC.CHECK_CLIENT_CONFIG, body=orjson.dumps(body))

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list) -> set:
        """LOCK_BATCH_MQ: the queues (of ``mqs``) this client now holds on that broker."""
        body = LockBatchRequestBody(group, client_id, [mq.to_json() for mq in mqs])
        response = await self.invoke(
            addr, RC.LOCK_BATCH_MQ, body=orjson.dumps(body.to_json_dict()), timeout_ms=1000
        )
        held = LockBatchResponseBody.from_json_dict(fastjson.loads(response.body) if response.body else {})
        return {MessageQueue.from_json(q) for q in held.lock_ok_mq_set}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list) -> None:
        body = UnlockBatchRequestBody(group, client_id, [mq.to_json() for mq in mqs])
        await self.invoke(addr, RC.UNLOCK_BATCH_MQ, body=orjson.dumps(body.to_json_dict()), timeout_ms=1000)
