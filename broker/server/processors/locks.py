"""LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: orderly consumers lock the queues they consume."""

from __future__ import annotations

import orjson

from broker.remoting import fastjson
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, response_to


def _parse(request: RemotingCommand):
    """``(group, client id, queue keys)`` of a Lock/UnlockBatchRequestBody, or a reason it is bad."""
    try:
        data = fastjson.loads(request.body) if request.body else {}
        group, client_id = data.get("consumerGroup") or "", data.get("clientId") or ""
        keys = [(q["topic"], q["brokerName"], int(q["queueId"])) for q in data.get("mqSet") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"the lock request body is malformed: {exc}"
    if not group or not client_id:
        return "the lock request needs consumerGroup and clientId"
    return group, client_id, keys


class LockProcessor:
    def __init__(self, broker) -> None:
        self.broker = broker

    async def lock_batch(self, conn, request: RemotingCommand) -> RemotingCommand:
        parsed = _parse(request)
        if isinstance(parsed, str):
            return response_to(request, ResponseCode.SYSTEM_ERROR, parsed)
        group, client_id, keys = parsed
        held = self.broker.queue_locks.try_lock_batch(group, keys, client_id)
        body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held]}
        return response_to(request, body=orjson.dumps(body))

    async def unlock_batch(self, conn, request: RemotingCommand) -> RemotingCommand:
        parsed = _parse(request)
        if isinstance(parsed, str):
            return response_to(request, ResponseCode.SYSTEM_ERROR, parsed)
        group, client_id, keys = parsed
        self.broker.queue_locks.unlock_batch(group, keys, client_id)
        return response_to(request)
