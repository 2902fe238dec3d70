"""Audit records of dead-letter replays, under one action name whoever or whatever wrote them.

Every replayed message gets its own ``dlq.replay`` record, written the same way by a single replay
(the web request) and by each message of a bulk replay (the Celery job): the message trace reads
these records to show a message's replays, so bulk replays appear there like single ones. The
request that queues a job, and a refusal (bad input, missing role), are ``dlq.replay`` records too.
"""

from __future__ import annotations

from console.services import dlq
from core.models import AuditRecord

REPLAY = "dlq.replay"
REPLAY_FINISHED = "dlq.replay.finished"


def outcome_fields(outcome: dlq.ReplayOutcome, **context) -> dict:
    """``parameters``, ``result`` and ``detail`` of the record of one replayed message; ``context``
    (scope, target, job) joins the parameters. ``msgId`` is what the trace looks records up by."""
    step = outcome.step
    parameters = {
        **context,
        "offsetMsgId": step.offset_msg_id,
        "msgId": step.client_msg_id,
        "destination": step.destination,
    }
    if outcome.error:
        return {"parameters": parameters, "result": AuditRecord.RESULT_FAILED, "detail": outcome.error}
    return {
        "parameters": {**parameters, "newMsgId": outcome.new_msg_id},
        "result": AuditRecord.RESULT_OK,
        "detail": f"sent to {step.destination} as {outcome.new_msg_id}",
    }


def replays_of(msg_id: str):
    """The replay records of one message (by its client msgId), oldest first."""
    return AuditRecord.objects.filter(action=REPLAY, parameters__msgId=msg_id).order_by("created_at", "id")
