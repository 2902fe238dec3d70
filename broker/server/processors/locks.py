"""LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: orderly consumers lock the queues they consume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.common import fastjson
from broker.common.codes import ResponseCode
from broker.common.request_headers import (
    HeaderError,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from broker.remoting.command import RemotingCommand, response_to

from .name_checks import name_problem

if TYPE_CHECKING:
    from ..controller import BrokerController


# Queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name: a consumer locks the queues it was given
# on one broker, at most a topic's queues (maxTopicQueueNums, 1,024 by default) per topic.
MAX_LOCK_QUEUES = 16 * 1024


def _parse(request: RemotingCommand, body_type: type[LockBatchRequestBody]):
    """``(group, client id, queue keys)`` of a lock/unlock body, or the reason it is unusable."""
    try:
        body = body_type.from_json_dict(fastjson.loads(request.body) if request.body else {})
    except (HeaderError, ValueError) as exc:
        return f"the lock request body is malformed: {exc}"
    if not body.consumer_group or not body.client_id:
        return "the lock request needs consumerGroup and clientId"
    if len(body.mq_set) > MAX_LOCK_QUEUES:
        return f"the lock request names {len(body.mq_set)} queues, more than {MAX_LOCK_QUEUES}"
    keys = [(mq["topic"], mq["brokerName"], mq["queueId"]) for mq in body.mq_set]
    problem = name_problem((topic for topic, _, _ in keys), (body.consumer_group,))
    if problem:
        return problem
    return body.consumer_group, body.client_id, keys


class LockProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def lock_batch(self, conn, request: RemotingCommand) -> RemotingCommand:
        parsed = _parse(request, LockBatchRequestBody)
        if isinstance(parsed, str):
            return response_to(request, ResponseCode.SYSTEM_ERROR, parsed)
        group, client_id, keys = parsed
        held = self.broker.queue_locks.try_lock_batch(group, keys, client_id)
        body = LockBatchResponseBody([{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held])
        return response_to(request, body=fastjson.dumps(body.to_json_dict()))

    async def unlock_batch(self, conn, request: RemotingCommand) -> RemotingCommand:
        parsed = _parse(request, UnlockBatchRequestBody)
        if isinstance(parsed, str):
            return response_to(request, ResponseCode.SYSTEM_ERROR, parsed)
        group, client_id, keys = parsed
        self.broker.queue_locks.unlock_batch(group, keys, client_id)
        return response_to(request)
