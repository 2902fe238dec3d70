"""``TransactionProducer``: messages that become visible only if a local transaction commits.

``send_message_in_transaction(msg, arg)`` stores a half message (invisible to consumers), runs
``listener.execute_local_transaction(msg, arg)`` and tells the broker the outcome with
END_TRANSACTION. When the outcome was UNKNOW (or never arrived) the broker later asks a live
producer of the same group with CHECK_TRANSACTION_STATE; ``listener.check_local_transaction(msg)``
answers, on a small thread pool so a slow check never stalls the network loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from broker.common import message_const as const
from broker.common.codes import RequestCode
from broker.common.message import Message, MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message, decode_offset_msg_id
from broker.common.request_headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    HeaderError,
)
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker.remoting.command import create_request

from .errors import MQClientError
from .producer import Producer, SendResult

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # RocketMQ's spelling


_WIRE_STATE = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass(frozen=True)
class TransactionSendResult:
    send_result: SendResult
    local_transaction_state: LocalTransactionState
    transaction_id: str

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


def _state(value) -> LocalTransactionState:
    return value if isinstance(value, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        listener: TransactionListener | None = None,
        *,
        check_threads: int = 1,
        **options,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.listener = listener
        self._check_pool = ThreadPoolExecutor(check_threads, thread_name_prefix=f"tx-check-{group}")

    def set_transaction_listener(self, listener: TransactionListener) -> None:
        self.listener = listener

    def start(self) -> TransactionProducer:
        if self.listener is None:
            raise MQClientError("set a transaction listener before starting the producer")
        super().start()
        # Checks arrive on the connection to the broker; the handler finds the producer by group.
        self._instance().remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        return self

    def shutdown(self) -> None:
        super().shutdown()
        self._check_pool.shutdown(wait=False, cancel_futures=True)

    # -- sending ------------------------------------------------------------------------------
    def send_message_in_transaction(self, msg: Message, arg=None) -> TransactionSendResult:
        if self.listener is None:
            raise MQClientError("the producer has no transaction listener")
        msg.delay_time_level = 0  # transactional messages cannot be delayed (as RocketMQ)
        msg.put_property(const.PROPERTY_TRANSACTION_PREPARED, "true")
        msg.put_property(const.PROPERTY_PRODUCER_GROUP, self.group)
        send_result = self.send(msg)
        if send_result.send_status != "SEND_OK":
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            msg.put_property(const.PROPERTY_TRANSACTION_ID, send_result.msg_id)
            try:
                state = _state(self.listener.execute_local_transaction(msg, arg))
            except Exception:
                log.exception("execute_local_transaction raised; the broker will check message %s later",
                              send_result.msg_id)  # fmt: skip
                state = LocalTransactionState.UNKNOW
        try:
            self._end_transaction(send_result, state)
        except Exception as exc:
            # The broker's check recovers the outcome later.
            log.warning("END_TRANSACTION for %s failed: %s", send_result.msg_id, exc)
        return TransactionSendResult(send_result, state, send_result.msg_id)

    def _end_transaction(self, send_result: SendResult, state: LocalTransactionState) -> None:
        addr = self._addr(send_result.message_queue)
        _, commitlog_offset = decode_offset_msg_id(send_result.offset_msg_id)
        header = EndTransactionRequestHeader(
            self.group,
            tran_state_table_offset=send_result.queue_offset,
            commit_log_offset=commitlog_offset,
            commit_or_rollback=_WIRE_STATE[state],
            msg_id=send_result.msg_id,
            from_transaction_check=False,
            transaction_id=send_result.msg_id,
        )
        instance = self._instance()
        instance.run(instance.api.end_transaction_oneway(addr, header))

    # -- the broker's checks ------------------------------------------------------------------
    async def _on_check(self, conn, request):
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            msg = decode_message(request.body, decompress_body=True)
        except (HeaderError, MessageDecodeError) as exc:
            log.warning("ignoring a malformed CHECK_TRANSACTION_STATE from %s: %s", conn.remote_addr, exc)
            return None
        group = msg.properties.get(const.PROPERTY_PRODUCER_GROUP, "")
        producer = self.instance.producers.get(group) if self.instance else None
        if not isinstance(producer, TransactionProducer) or producer.listener is None:
            log.warning("CHECK_TRANSACTION_STATE for group %s, which has no transaction producer here", group)
            return None
        loop = asyncio.get_running_loop()
        loop.run_in_executor(producer._check_pool, producer._check_and_answer, conn, header, msg, loop)
        return None

    def _check_and_answer(
        self, conn, header: CheckTransactionStateRequestHeader, msg: MessageExt, loop
    ) -> None:
        assert self.listener is not None  # _on_check hands over only to a producer with one
        if header.transaction_id:
            msg.properties[const.PROPERTY_TRANSACTION_ID] = header.transaction_id
        try:
            state = _state(self.listener.check_local_transaction(msg))
        except Exception:
            log.exception("check_local_transaction raised for %s; answering UNKNOW", msg.unique_key)
            state = LocalTransactionState.UNKNOW
        answer = EndTransactionRequestHeader(
            self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=_WIRE_STATE[state],
            msg_id=msg.unique_key or header.msg_id or msg.msg_id,
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        request = create_request(RequestCode.END_TRANSACTION, answer.to_ext_fields(), oneway=True)
        loop.call_soon_threadsafe(_write_quietly, conn, request)


def _write_quietly(conn, request) -> None:
    try:
        conn.invoke_oneway(request)
    except Exception as exc:
        log.warning("answering a transaction check to %s failed: %s", getattr(conn, "remote_addr", "?"), exc)
