"""Every remote call of the SDK in one place: request headers in, typed results out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson

from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import decode_messages, properties_to_string, string_to_properties
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import (
    CommandHeader,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from broker.remoting import fastjson
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request

from .errors import MQBrokerError

PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUSPEND, PULL_FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
_PULL_ANSWERS = (
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)
_REPLY_MARK = properties_to_string({"MSG_TYPE": "reply"})  # as it appears in the properties header


def _checked(response: RemotingCommand, addr: str, allowed: tuple[int, ...] = (ResponseCode.SUCCESS,)):
    if response.code not in allowed:
        raise MQBrokerError(response.code, response.remark, addr)
    return response


def send_request(header: dict, body: bytes, batch: bool = False, oneway: bool = False) -> RemotingCommand:
    """SEND_MESSAGE, SEND_BATCH_MESSAGE, or SEND_REPLY_MESSAGE for a reply (MSG_TYPE=reply), which
    the broker pushes to the requester.

    With the V1 header (full field names), not the V2 one RocketMQ's Java client sends by
    default: the broker renames a V2 header's fields before use, which measured 1.4-2.2 us more
    per send in bench/broker_path.py and 5-10 us more end to end at p50. The broker's V2 path is
    exercised by ali-ons (tests/compat) and the broker's own tests."""
    properties = header.get("properties") or ""
    if _REPLY_MARK in properties and string_to_properties(properties).get("MSG_TYPE") == "reply":
        code = RC.SEND_REPLY_MESSAGE
    else:
        code = RC.SEND_BATCH_MESSAGE if batch else RC.SEND_MESSAGE
    return create_request(code, header, body, oneway=oneway)


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
        through; the caller reads a typed response header with ``X.from_ext_fields(r.ext_fields)``."""
        fields = header.to_ext_fields() if header is not None else None
        request = create_request(code, fields, body or b"")
        return _checked(await self.remoting.invoke(addr, request, timeout_ms), addr, allowed)

    async def topic_route(self, namesrv: str, topic: str, timeout_ms: int = 3000) -> dict | None:
        response = await self.remoting.invoke(
            namesrv, create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout_ms
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return fastjson.loads(_checked(response, namesrv).body)

    async def send(
        self, addr: str, header: dict, body: bytes, timeout_ms: int, batch: bool = False
    ) -> RemotingCommand:
        return _checked(await self.remoting.invoke(addr, send_request(header, body, batch), timeout_ms), addr)

    async def send_oneway(self, addr: str, header: dict, body: bytes) -> None:
        await self.remoting.invoke_oneway(addr, send_request(header, body, oneway=True))

    async def pull(
        self, addr: str, header: dict, timeout_ms: int, on_found: Callable[[list], None]
    ) -> tuple[int, dict]:
        """PULL_MESSAGE: the response's code and fields. The messages found go to
        ``on_found`` while the answer is being read, not when the caller resumes: that would be
        a turn of the loop later, and through every coroutine waiting on this one, in the path
        of each message a consumer receives. Once the caller stopped waiting (cancelled: its
        queue went to another member), an answer is dropped."""
        connection = await self.remoting.connection(addr)
        answered = asyncio.get_running_loop().create_future()

        def on_answer(response: RemotingCommand | None, error: Exception | None) -> None:
            if answered.done():
                return
            if error is not None:
                answered.set_exception(error)
                return
            try:
                _checked(response, addr, _PULL_ANSWERS)
                if response.code == ResponseCode.SUCCESS:
                    on_found(decode_messages(response.body, decompress_body=True))
            except Exception as exc:
                answered.set_exception(exc)
            else:
                answered.set_result((response.code, response.ext_fields))

        connection.invoke_with_callback(create_request(RC.PULL_MESSAGE, header), timeout_ms, on_answer)
        return await answered

    async def heartbeat(self, addr: str, data: dict) -> None:
        _checked(
            await self.remoting.invoke(addr, create_request(RC.HEART_BEAT, body=orjson.dumps(data))), addr
        )

    async def unregister(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ):
        fields = {"clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}
        await self.remoting.invoke(addr, create_request(RC.UNREGISTER_CLIENT, fields), 3000)

    async def consumer_ids(self, addr: str, group: str) -> list[str]:
        response = await self.remoting.invoke(
            addr, create_request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        )
        if response.code != ResponseCode.SUCCESS:
            return []
        return list(fastjson.loads(response.body).get("consumerIdList") or [])

    async def query_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
        response = await self.remoting.invoke(addr, create_request(RC.QUERY_CONSUMER_OFFSET, fields))
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return int(_checked(response, addr).field("offset"))

    async def update_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        await self.remoting.invoke_oneway(
            addr, create_request(RC.UPDATE_CONSUMER_OFFSET, fields, oneway=True)
        )

    async def offset_query(
        self, addr: str, code: int, topic: str, queue_id: int, timestamp: int | None = None
    ) -> int:
        fields = {"topic": topic, "queueId": queue_id, "timestamp": timestamp}
        return int(
            _checked(await self.remoting.invoke(addr, create_request(code, fields)), addr).field("offset")
        )

    async def send_back(self, addr: str, header: dict, timeout_ms: int = 3000) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-delivers the message later (or dead-letters it)."""
        request = create_request(RC.CONSUMER_SEND_MSG_BACK, header)
        _checked(await self.remoting.invoke(addr, request, timeout_ms), addr)

    async def end_transaction_oneway(self, addr: str, header: dict, remark: str | None = None) -> None:
        """END_TRANSACTION, oneway as RocketMQ's producers send it (the broker answers nothing)."""
        request = create_request(RC.END_TRANSACTION, header, oneway=True)
        request.remark = remark
        await self.remoting.invoke_oneway(addr, request)

    async def check_client_config(self, addr: str, client_id: str, group: str, subscription: dict) -> None:
        """CHECK_CLIENT_CONFIG: raises ``MQBrokerError`` (SUBSCRIPTION_PARSE_FAILED, …) when refused."""
        body = {"clientId": client_id, "group": group, "subscriptionData": subscription}
        request = create_request(RC.CHECK_CLIENT_CONFIG, body=orjson.dumps(body))
        _checked(await self.remoting.invoke(addr, request, 3000), addr)

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list) -> set:
        """LOCK_BATCH_MQ: the queues (of ``mqs``) this client now holds on that broker."""
        body = LockBatchRequestBody(group, client_id, [mq.to_json() for mq in mqs])
        request = create_request(RC.LOCK_BATCH_MQ, body=orjson.dumps(body.to_json_dict()))
        response = _checked(await self.remoting.invoke(addr, request, 1000), addr)
        held = LockBatchResponseBody.from_json_dict(fastjson.loads(response.body) if response.body else {})
        return {MessageQueue.from_json(q) for q in held.lock_ok_mq_set}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list) -> None:
        body = UnlockBatchRequestBody(group, client_id, [mq.to_json() for mq in mqs])
        request = create_request(RC.UNLOCK_BATCH_MQ, body=orjson.dumps(body.to_json_dict()))
        _checked(await self.remoting.invoke(addr, request, 1000), addr)
