"""END_TRANSACTION (37): commit or roll back a half message.

Producers send it oneway after their local transaction (or in answer to a check, with
``fromTransactionCheck``); operator tools send it as a normal request naming a pending half
message by commit-log offset, and get an answer saying what happened.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.common.acl_rules import PUB
from broker.common.codes import ResponseCode
from broker.common.request_headers import EndTransactionRequestHeader
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker.common.topic_config import is_writeable
from broker.remoting.command import RemotingCommand, response_to

from ..acl_stored import stored_message_refusal
from .name_checks import name_refusal
from .send import put_status_code

if TYPE_CHECKING:
    from ..controller import BrokerController

log = logging.getLogger(__name__)


class EndTransactionProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def end_transaction(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        refused = name_refusal(request, groups=(header.producer_group or None,))
        if refused is not None:
            return refused
        if not is_writeable(self.broker.config.broker_permission):
            return response_to(request, ResponseCode.NO_PERMISSION, "the broker does not accept writes now")
        state = header.commit_or_rollback
        origin = "check answer" if header.from_transaction_check else "producer"
        answered = _state_answer(request, header, origin)
        if answered is not None:
            return answered
        service = self.broker.transactions
        half = service.find_half(header)
        if isinstance(half, str):
            log.warning(
                "END_TRANSACTION from %s (%s) for %s refused: %s",
                conn.remote_addr,
                origin,
                header.msg_id,
                half,
            )
            return response_to(request, ResponseCode.SYSTEM_ERROR, half)
        refused = stored_message_refusal(self.broker, conn, request, half, PUB)
        if refused is not None:
            return refused
        if state == TRANSACTION_COMMIT_TYPE:
            result = await service.commit(half)
        else:
            result = await service.rollback(half)
        if not result.ok:
            code = put_status_code(result.put.status) if result.put else ResponseCode.SYSTEM_ERROR
            return response_to(
                request, code if code != ResponseCode.SUCCESS else ResponseCode.SYSTEM_ERROR, result.remark
            )
        return response_to(request)


def _state_answer(
    request: RemotingCommand, header: EndTransactionRequestHeader, origin: str
) -> RemotingCommand | None:
    """The answer to a state that ends nothing (unknown) or is no state; None for commit and
    rollback."""
    state = header.commit_or_rollback
    if state == TRANSACTION_NOT_TYPE:
        log.info(
            "%s of group %s left transaction %s unknown (msgId %s)",
            origin,
            header.producer_group,
            header.transaction_id,
            header.msg_id,
        )
        return response_to(request, ResponseCode.SUCCESS, "transaction state unknown: nothing done")
    if state not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return response_to(
            request,
            ResponseCode.SYSTEM_ERROR,
            f"commitOrRollback={state} must be {TRANSACTION_COMMIT_TYPE} (commit), "
            f"{TRANSACTION_ROLLBACK_TYPE} (rollback) or {TRANSACTION_NOT_TYPE} (unknown)",
        )
    return None
