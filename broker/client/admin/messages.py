"""Messages: look one up by offsetMsgId, client msgId or key, read a queue without committing,
hand one to a consumer again, end a half message, and the delay levels' progress."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from broker.client.client_api import answer_header
from broker.client.errors import MQBrokerError, NotFoundError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.hosts import format_host
from broker.common.message import MessageExt
from broker.common.pull_sysflag import build_pull_sys_flag
from broker.common.request_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker.common.system_names import TOOLS_CONSUMER_GROUP

from .core import BROKER, AdminCore
from .parse import as_int, json_body, looks_like_offset_msg_id, messages_of, store_host_of
from .results import PullResult

# What a pull's response code means, as RocketMQ's PullStatus names it.
_PULL_STATUS: dict[int, str] = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}
# RocketMQ's brokers (and ours) answer SYSTEM_ERROR with this remark for an offset that holds
# no message: the message does not exist, the broker did not fail.
_NO_MESSAGE_AT_OFFSET = "can not find message by the offset"
_LATEST = 2**63 - 1


class MessageRequests(AdminCore):
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offsetMsgId names: its store host answers VIEW_MESSAGE_BY_ID."""
        host, commit_log_offset = store_host_of(offset_msg_id)
        addr = format_host(host)
        not_found = NotFoundError(
            f"message {offset_msg_id} not found: no message at offset {commit_log_offset} of {addr}"
        )
        response = await self._request(
            addr,
            RequestCode.VIEW_MESSAGE_BY_ID,
            ViewMessageRequestHeader(commit_log_offset),
            allowed=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )
        if response.code == ResponseCode.SYSTEM_ERROR:
            if (response.remark or "").startswith(_NO_MESSAGE_AT_OFFSET):
                raise not_found
            raise MQBrokerError(response.code, response.remark, addr, BROKER)
        messages = messages_of(response.body)
        if not messages:
            raise not_found
        return messages[0]

    async def view_cluster_message(self, offset_msg_id: str) -> MessageExt:
        """``view_message`` asked only of a broker the name servers list: an id naming another host
        is not found in this cluster, and nothing connects to the host it names."""
        host, _ = store_host_of(offset_msg_id)
        if host not in await self._known_broker_hosts():
            namesrv = ";".join(self.namesrv_addrs)
            raise NotFoundError(
                f"message {offset_msg_id} not found: it names store host {format_host(host)}, "
                f"which is no broker registered on name server {namesrv}"
            )
        return await self.view_message(offset_msg_id)

    async def query_message_by_id(self, topic: str, msg_id: str) -> list[MessageExt]:
        """A 32-hex id may be an offsetMsgId or a client msgId; try the first when it decodes to a
        broker this cluster knows, then fall back to the unique-key index, as RocketMQ does."""
        if looks_like_offset_msg_id(msg_id):
            host, _ = store_host_of(msg_id)
            if host in await self._known_broker_hosts():
                try:
                    return [await self.view_message(msg_id)]
                except (MQBrokerError, NotFoundError):
                    pass
        found = await self.query_message_by_unique_key(topic, msg_id)
        if not found:
            raise NotFoundError(f"message {msg_id} not found in topic {topic!r}")
        return found

    async def query_message_by_unique_key(
        self, topic: str, msg_id: str, max_num: int = 32
    ) -> list[MessageExt]:
        found = await self._query_index(topic, msg_id, 0, _LATEST, max_num, unique=True)
        return [m for m in found if m.unique_key == msg_id]

    async def query_message_by_key(
        self, topic: str, key: str, begin: int = 0, end: int = _LATEST, max_num: int = 64
    ) -> list[MessageExt]:
        found = await self._query_index(topic, key, begin, end, max_num, unique=False)
        # The index matches on key hashes; keep only real matches.
        return [m for m in found if key in m.keys][:max_num]

    async def _query_index(
        self, topic: str, key: str, begin: int, end: int, max_num: int, unique: bool
    ) -> list[MessageExt]:
        header = QueryMessageRequestHeader(topic, key, max_num, begin, end, unique_key_query=unique or None)
        messages: list[MessageExt] = []
        for addr in (await self.topic_route(topic)).master_addrs():
            response = await self._request_unless(
                addr, RequestCode.QUERY_MESSAGE, header, (ResponseCode.QUERY_NOT_FOUND,)
            )
            if response is not None:
                messages.extend(messages_of(response.body))
        messages.sort(key=lambda m: m.store_timestamp)
        return messages

    async def pull_messages(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> PullResult:
        """One non-blocking pull of up to ``max_nums`` messages, committing nothing."""
        # Subscription flag set and "*" sent with it: the broker then needs no registered consumer
        # of the group to filter for us, and suspendTimeoutMillis 0 means no long polling.
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True),
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        response = await self._request(addr, RequestCode.PULL_MESSAGE, header, allowed=tuple(_PULL_STATUS))
        status = _PULL_STATUS[response.code]
        # Every pull answer carries the offsets (RocketMQ's brokers, ours, FOUND or not).
        answer = answer_header(PullMessageResponseHeader, response, f"{BROKER} {addr}")
        return PullResult(
            status=status,
            next_begin_offset=answer.next_begin_offset,
            min_offset=answer.min_offset,
            max_offset=answer.max_offset,
            messages=messages_of(response.body) if status == "FOUND" else [],
        )

    async def iter_queue_messages(
        self, addr: str, topic: str, queue_id: int, start: int, end: int, group: str = TOOLS_CONSUMER_GROUP
    ) -> AsyncIterator[MessageExt]:
        """Messages of one queue from ``start`` up to (not including) ``end``."""
        offset = start
        while offset < end:
            result = await self.pull_messages(addr, topic, queue_id, offset, min(32, end - offset), group)
            if result.status != "FOUND" or result.next_begin_offset <= offset:
                return
            for message in result.messages:
                if message.queue_offset < end:
                    yield message
            offset = result.next_begin_offset

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Hand one stored message to one online consumer (CONSUME_MESSAGE_DIRECTLY through the
        message's store host) and return its ConsumeMessageDirectlyResult (consumeResult, remark,
        spentTimeMills). Nothing is committed: it is a redelivery to that client only."""
        addr = format_host(store_host_of(offset_msg_id)[0])
        header = ConsumeMessageDirectlyResultRequestHeader(
            group, client_id=client_id, msg_id=offset_msg_id, topic=topic or None
        )
        return await self._broker_json(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)

    # -- delayed messages and transactions (console W6/W7) ---------------------------------------

    async def delay_offsets(self, addr: str) -> dict[int, int]:
        """Delay progress per level (GET_ALL_DELAY_OFFSET): the schedule-topic offset each level's
        timer has delivered up to. RocketMQ answers with its ``delayOffset.json`` body."""
        response = await self._request(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        table = json_body(response, f"{BROKER} {addr}").get("offsetTable") or {}
        return {int(level): as_int(offset) for level, offset in table.items()}

    async def end_transaction(
        self,
        addr: str,
        producer_group: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        msg_id: str,
        commit: bool,
        transaction_id: str | None = None,
    ) -> None:
        """Commit or roll back a half message as an operator (END_TRANSACTION with
        fromTransactionCheck, as a producer answering a check does), addressed by the half
        message's queue offset and commit-log offset on broker ``addr``."""
        header = EndTransactionRequestHeader(
            producer_group=producer_group,
            tran_state_table_offset=tran_state_table_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE,
            msg_id=msg_id,
            from_transaction_check=True,
            transaction_id=transaction_id or None,
        )
        await self._request(addr, RequestCode.END_TRANSACTION, header)
