"""``TransactionalMessageCheckService``: every ``transactionCheckInterval`` ask a live producer of
the right group about half messages older than ``transactionTimeOut``; after
``transactionCheckMax`` checks move them to ``TRANS_CHECK_MAX_TIME_TOPIC``.

Each check first appends a copy of the half message with its check count + 1 (so the count
survives a restart, as RocketMQ does) and then sends CHECK_TRANSACTION_STATE naming the copy;
the producer answers with END_TRANSACTION for that copy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.codes import RequestCode
from broker.common.message import MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message, encode_message
from broker.common.request_headers import CheckTransactionStateRequestHeader
from broker.remoting.command import create_request

from . import half_message as hm
from .service import TransactionalMessageService

if TYPE_CHECKING:
    from ..controller import BrokerController

log = logging.getLogger(__name__)
_BATCH = 64


class TransactionalMessageCheckService:
    def __init__(
        self, broker: BrokerController, service: TransactionalMessageService, clock=time.time
    ) -> None:
        self.broker = broker
        self.service = service
        self.store = broker.store
        self.clock = clock
        self.checks_sent = 0
        self._stopping = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._stopping.clear()
        self.service.read_new_ops()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Let a running round finish (so its progress is consistent), then stop."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(
                    self._stopping.wait(), self.broker.config.transaction_check_interval / 1000
                )
                return
            except TimeoutError:
                pass
            try:
                await self.check_round()
            except Exception:
                log.exception("transaction check round failed")

    async def check_round(self) -> None:
        queue = self.store.find_consume_queue(tc.TRANS_HALF_TOPIC, hm.HALF_QUEUE_ID)
        if queue is None:
            return
        self.service.read_new_ops()
        offset = max(self.service.half_offset(), queue.min_offset)
        end = queue.max_offset  # copies appended during this round wait for the next one
        now = int(self.clock() * 1000)
        config = self.broker.config
        while offset < end and not self._stopping.is_set():
            if offset in self.service.resolved:
                offset += 1
                continue
            half = self._read_half(queue, offset)
            if half is not None:
                if hm.check_times(half) >= config.transaction_check_max:
                    if not await self._discard(half):
                        break
                elif now - half.born_timestamp < hm.immunity_ms(half, config.transaction_timeout):
                    break  # not old enough; later ones are younger still
                elif not await self._check(half):
                    break
            offset += 1
            self.service.read_new_ops()
            if offset % _BATCH == 0:
                await asyncio.sleep(0)  # a long backlog must not starve the broker's other work
        self.service.commit_progress(offset)

    def _read_half(self, queue, offset: int) -> MessageExt | None:
        entry = queue.entry(offset)
        record = self.store.select_one_message_by_offset(entry[0], entry[1]) if entry else None
        try:
            return decode_message(record) if record else None
        except MessageDecodeError as exc:
            log.error("half message at queue offset %d is unreadable; skipped: %s", offset, exc)
            return None

    async def _discard(self, half: MessageExt) -> bool:
        topics = self.broker.topics
        if topics.get(tc.TRANS_CHECK_MAX_TIME_TOPIC) is None:
            topics.ensure(tc.TRANS_CHECK_MAX_TIME_TOPIC, 1, tc.PERM_READ | tc.PERM_WRITE)
            self.broker.register_soon()
        result = await self.store.put_messages_async([hm.check_max_message(half)])
        if not result.ok:
            log.warning(
                "moving half message %s to %s failed: %s",
                half.unique_key,
                tc.TRANS_CHECK_MAX_TIME_TOPIC,
                result.status.value,
            )
            return False
        log.info(
            "half message %s unresolved after %d checks: moved to %s",
            half.unique_key,
            hm.check_times(half),
            tc.TRANS_CHECK_MAX_TIME_TOPIC,
        )
        return True

    async def _check(self, half: MessageExt) -> bool:
        renewed = hm.renewed_half_message(half, hm.check_times(half) + 1)
        result = await self.store.put_messages_async([renewed])
        appended = result.append
        if not result.ok or appended is None:
            log.warning("re-appending half message %s failed: %s", half.unique_key, result.status.value)
            return False
        renewed.commitlog_offset = appended.wrote_offset
        renewed.queue_offset = appended.logics_offset
        renewed.store_timestamp = appended.store_timestamp
        renewed.msg_id = appended.msg_id
        self._ask_producer(renewed)
        return True

    def _ask_producer(self, half: MessageExt) -> None:
        group = half.properties.get(const.PROPERTY_PRODUCER_GROUP, "")
        channel = self.broker.producers.any_channel(group)
        if channel is None:
            log.warning("no live producer of group %s to check transaction %s", group, half.unique_key)
            return
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commitlog_offset,
            msg_id=half.unique_key,
            transaction_id=half.unique_key,
            offset_msg_id=half.msg_id,
        )
        shown = _as_producer_sees_it(half, self.broker.config.broker_addr)
        request = create_request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), bytes(encode_message(shown))
        )
        try:
            channel.connection.invoke_oneway(request)
            self.checks_sent += 1
        except Exception as exc:
            log.warning("checking transaction %s with %s failed: %s", half.unique_key, channel.client_id, exc)


def _as_producer_sees_it(half: MessageExt, broker_addr: str) -> MessageExt:
    """The half message with its real topic and queue, as the producer's listener expects."""
    host, _, port = broker_addr.rpartition(":")
    shown = MessageExt(
        half.properties.get(const.PROPERTY_REAL_TOPIC, half.topic),
        half.body,
        half.flag,
        dict(half.properties),
        queue_id=int(half.properties.get(const.PROPERTY_REAL_QUEUE_ID, "0") or 0),
        queue_offset=half.queue_offset,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_timestamp=half.store_timestamp,
        store_host=(host, int(port)),
        msg_id=half.msg_id,
        commitlog_offset=half.commitlog_offset,
        reconsume_times=half.reconsume_times,
    )
    return shown
