"""``MQClientAPI``: every remote call the SDK makes, in one place (RocketMQ's MQClientAPIImpl).

Headers go out as :mod:`broker.common.request_headers` dataclasses; responses come back as
typed results. A response code that means failure becomes :class:`MQBrokerError` carrying
RocketMQ's code and the peer's remark; transport failures stay ``RemotingError`` so callers
can tell "the broker said no" from "the broker could not be reached" (producers retry both,
but only the second isolates the broker).
"""

from __future__ import annotations

import orjson

from broker.common import request_headers as rh
from broker.remoting import fastjson
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode as RC
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_request

from .errors import MQBrokerError
from .message_queue import MessageQueue
from .results import PULL_STATUS_BY_CODE, SEND_STATUS_BY_CODE, PullResult, SendResult

DEFAULT_TIMEOUT_MS = 3000


def check(response: RemotingCommand, addr: str, *allowed: int) -> RemotingCommand:
    """``response`` when its code is SUCCESS (or one of ``allowed``), else MQBrokerError."""
    if response.code == ResponseCode.SUCCESS or response.code in allowed:
        return response
    raise MQBrokerError(response.code, response.remark, addr)


def _batch_header_fields(header: rh.SendMessageRequestHeader) -> dict[str, str]:
    # RocketMQ brokers read SEND_BATCH_MESSAGE headers in the V2 (one-letter) form, this
    # project's broker reads V1 names: a batch carries both so either broker accepts it.
    v2 = rh.SendMessageRequestHeaderV2.from_v1(header).to_ext_fields()
    return {**header.to_ext_fields(), **v2}


class MQClientAPI:
    def __init__(self, remoting: RemotingClient) -> None:
        self.remoting = remoting

    async def _call(self, addr: str, code: int, header=None, body: bytes = b"", timeout_ms=None):
        fields = header.to_ext_fields() if isinstance(header, rh.CommandHeader) else header
        request = create_request(code, fields, body)
        return await self.remoting.invoke(addr, request, timeout_ms or DEFAULT_TIMEOUT_MS)

    # -- name server ------------------------------------------------------------------------
    async def get_topic_route(self, namesrv: str, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        """The route JSON of ``topic``, or None when the name server does not know it."""
        header = rh.GetRouteInfoRequestHeader(topic=topic)
        response = await self._call(namesrv, RC.GET_ROUTEINFO_BY_TOPIC, header, timeout_ms=timeout_ms)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return fastjson.loads(check(response, namesrv).body)

    # -- sending ----------------------------------------------------------------------------
    async def send_message(
        self,
        addr: str,
        mq: MessageQueue,
        header: rh.SendMessageRequestHeader,
        body: bytes,
        timeout_ms: int,
        msg_id: str,
    ) -> SendResult:
        if header.batch:
            request = create_request(RC.SEND_BATCH_MESSAGE, _batch_header_fields(header), body)
        else:
            v2 = rh.SendMessageRequestHeaderV2.from_v1(header)
            request = create_request(RC.SEND_MESSAGE_V2, v2.to_ext_fields(), body)
        response = await self.remoting.invoke(addr, request, timeout_ms)
        if response.code not in SEND_STATUS_BY_CODE:
            raise MQBrokerError(response.code, response.remark, addr)
        fields = rh.SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        return SendResult(
            send_status=SEND_STATUS_BY_CODE[response.code],
            msg_id=msg_id,
            offset_msg_id=fields.msg_id,
            message_queue=MessageQueue(mq.topic, mq.broker_name, fields.queue_id),
            queue_offset=fields.queue_offset,
            region_id=fields.msg_region or "DefaultRegion",
            trace_on=(fields.trace_on or "true") != "false",
        )

    async def send_message_oneway(self, addr: str, header: rh.SendMessageRequestHeader, body: bytes):
        v2 = rh.SendMessageRequestHeaderV2.from_v1(header)
        request = create_request(RC.SEND_MESSAGE_V2, v2.to_ext_fields(), body, oneway=True)
        await self.remoting.invoke_oneway(addr, request)

    # -- pulling ----------------------------------------------------------------------------
    async def pull_message(
        self, addr: str, header: rh.PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        response = await self._call(addr, RC.PULL_MESSAGE, header, timeout_ms=timeout_ms)
        status = PULL_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise MQBrokerError(response.code, response.remark, addr)
        fields = rh.PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        return PullResult(
            pull_status=status,
            next_begin_offset=fields.next_begin_offset,
            min_offset=fields.min_offset,
            max_offset=fields.max_offset,
            suggest_which_broker_id=fields.suggest_which_broker_id,
            raw_body=response.body or b"",
        )

    # -- clients ----------------------------------------------------------------------------
    async def send_heartbeat(self, addr: str, heartbeat: dict, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        response = await self._call(addr, RC.HEART_BEAT, body=orjson.dumps(heartbeat), timeout_ms=timeout_ms)
        check(response, addr)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        header = rh.UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        check(await self._call(addr, RC.UNREGISTER_CLIENT, header), addr)

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        header = rh.GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = check(await self._call(addr, RC.GET_CONSUMER_LIST_BY_GROUP, header), addr)
        return list((fastjson.loads(response.body) or {}).get("consumerIdList") or [])

    # -- offsets ----------------------------------------------------------------------------
    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        """The committed offset; MQBrokerError(QUERY_NOT_FOUND) for a group that never committed."""
        header = rh.QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id)
        response = check(await self._call(addr, RC.QUERY_CONSUMER_OFFSET, header), addr)
        return rh.QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset or 0

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, oneway: bool = True
    ) -> None:
        header = rh.UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        if oneway:
            request = create_request(RC.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), oneway=True)
            await self.remoting.invoke_oneway(addr, request)
        else:
            check(await self._call(addr, RC.UPDATE_CONSUMER_OFFSET, header), addr)

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        header = rh.GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)
        response = check(await self._call(addr, RC.GET_MAX_OFFSET, header), addr)
        return rh.GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        header = rh.GetMinOffsetRequestHeader(mq.topic, mq.queue_id)
        response = check(await self._call(addr, RC.GET_MIN_OFFSET, header), addr)
        return rh.GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        header = rh.SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
        response = check(await self._call(addr, RC.SEARCH_OFFSET_BY_TIMESTAMP, header), addr)
        return rh.SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue) -> int:
        header = rh.GetEarliestMsgStoretimeRequestHeader(mq.topic, mq.queue_id)
        response = check(await self._call(addr, RC.GET_EARLIEST_MSG_STORETIME, header), addr)
        return rh.GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp
