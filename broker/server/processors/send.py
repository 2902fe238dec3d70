"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.

Before a single message is stored it may change topic, as in RocketMQ's broker: a transaction's
half message goes to the half topic, a message to ``%RETRY%<group>`` that used up its
reconsume times goes to ``%DLQ%<group>``, and a delayed message goes to the schedule topic.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.batch_codec import BatchDecodeError, decode_batch
from broker.common.codes import RequestCode, ResponseCode
from broker.common.hosts import parse_host
from broker.common.message import MessageExt
from broker.common.message_codec import string_to_properties
from broker.common.message_const import PROPERTY_CLUSTER
from broker.common.names import KNOWN_LEGAL_GROUPS, KNOWN_LEGAL_TOPICS, group_problem, topic_problem
from broker.common.request_headers import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_send_request,
)
from broker.common.sysflag import (
    TRANSACTION_PREPARED_TYPE,
    compressed_body_problem,
    send_flag_problem,
    transaction_value,
)
from broker.remoting.command import RemotingCommand, response_to
from broker.store.results import PutMessageResult, PutMessageStatus

from ..schedule_message import to_schedule_message
from ..transaction.half_message import is_half_request, to_half_message
from .disk_refusal import disk_full_refusal, not_created

if TYPE_CHECKING:
    from ..controller import BrokerController

# As RocketMQ's handlePutMessageResult. A refused put's remark is the store's (RocketMQ's text:
# SERVICE_NOT_AVAILABLE quotes the disk figures, "the broker's disk is full [CL: ...]", and our
# cause; CREATE_MAPPED_FILE_FAILED "create mapped file failed, server is busy or broken."): both
# codes make a producer retry on another broker.
_PUT_STATUS_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutMessageStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
}


# RocketMQ's TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: topics only the broker itself writes. A
# client's message there would be taken for a half message, an op record or a delayed entry.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        tc.SCHEDULE_TOPIC,
        tc.TRANS_HALF_TOPIC,
        tc.TRANS_OP_HALF_TOPIC,
        tc.TRANS_CHECK_MAX_TIME_TOPIC,
        tc.SELF_TEST_TOPIC,
        tc.OFFSET_MOVED_EVENT,
    }
)


def _prepared_problem(header: SendMessageRequestHeader) -> str | None:
    """A prepared transaction type without TRAN_MSG=true is no half message: the record would be
    stored in the topic and hidden from consumers for good."""
    if transaction_value(header.sys_flag) != TRANSACTION_PREPARED_TYPE:
        return None
    if string_to_properties(header.properties or "").get(const.PROPERTY_TRANSACTION_PREPARED) == "true":
        return None
    return (
        f"sysFlag {header.sys_flag} marks a prepared transaction, but the message has no "
        f"{const.PROPERTY_TRANSACTION_PREPARED}=true property"
    )


def send_refusal(request, header: SendMessageRequestHeader, illegal_code: int) -> RemotingCommand | None:
    """The refusal of a send or reply for its header alone (the topic and producer group names,
    the ``sysFlag``), or None."""
    topic, producer_group = header.topic, header.producer_group
    # Spelled out rather than name_refusal's loops: every send passes here. Names seen legal
    # before (the usual send) cost a set lookup each and no call.
    if topic not in KNOWN_LEGAL_TOPICS or (producer_group and producer_group not in KNOWN_LEGAL_GROUPS):
        problem = topic_problem(topic) or (group_problem(producer_group) if producer_group else None)
        if problem is not None:
            return response_to(request, illegal_code, problem)
    sys_flag = header.sys_flag
    if sys_flag:  # a zero sysFlag (a plain message) passes every flag check: none is called
        flag_problem = send_flag_problem(sys_flag) or _prepared_problem(header)
        if flag_problem is None and not (request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch):
            flag_problem = compressed_body_problem(sys_flag, request.body)
        if flag_problem is not None:
            return response_to(request, ResponseCode.MESSAGE_ILLEGAL, flag_problem)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return response_to(
            request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
        )
    return None


def ensure_system_topic(broker: BrokerController, topic: str, queues: int, perm: int):
    """Create a topic the broker needs (retry/DLQ) once, and tell the name servers; None while
    the disk is full (see TopicConfigManager.ensure)."""
    config = broker.topics.get(topic)
    if config is None:
        config = broker.topics.ensure(topic, queues, perm)
        if config is not None:
            broker.register_soon()
    return config


def ensure_dlq_topic(broker: BrokerController, group: str):
    # One queue, write-only: a dead letter is kept, never consumed automatically (as RocketMQ).
    return ensure_system_topic(broker, tc.dlq_topic(group), 1, tc.PERM_WRITE)


def put_status_code(status: PutMessageStatus) -> int:
    return _PUT_STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)


def single_message(request, header: SendMessageRequestHeader, topic: str, queue_id: int, conn) -> MessageExt:
    """The message a SEND_MESSAGE(-like) request carries: body, then the header's fields."""
    return MessageExt(
        topic,
        request.body,
        header.flag,
        string_to_properties(header.properties or ""),
        queue_id=queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=born_host_of(conn),
        reconsume_times=header.reconsume_times or 0,
    )


def messages_from_request(
    request, header: SendMessageRequestHeader, topic: str, queue_id: int, conn, max_size: int
) -> list[MessageExt] | str:
    """The messages of a send request (one, or a batch); a reason string when the batch is bad."""
    if not (request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch):
        return [single_message(request, header, topic, queue_id, conn)]
    if len(request.body) > max_size:  # the whole batch, as RocketMQ's maxMessageSize; before decoding
        return f"the batch is {len(request.body)} bytes, the limit is {max_size}"
    try:
        batch = decode_batch(request.body, topic)
    except BatchDecodeError as exc:
        return str(exc)
    if not batch:
        return "the batch is empty"
    born_host, reconsume_times = born_host_of(conn), header.reconsume_times or 0
    return [
        MessageExt(
            topic, m.body, m.flag, m.properties, queue_id=queue_id, sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp, born_host=born_host, reconsume_times=reconsume_times,
        )
        for m in batch
    ]  # fmt: skip


class SendProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Processors are made when the broker starts, once its hold service exists.
        assert broker.hold is not None
        self.hold = broker.hold

    def send(self, conn, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Answers at once on an ASYNC_FLUSH store; returns an awaitable when the message must
        be flushed (SYNC_FLUSH) before the producer hears of it."""
        header = decode_send_request(request.ext_fields)
        topic = header.topic
        # A bad name is SYSTEM_ERROR, as RocketMQ's msgCheck (TopicValidator.validateTopic).
        refused = send_refusal(request, header, ResponseCode.SYSTEM_ERROR)
        if refused is not None:
            return refused
        if not tc.is_writeable(self.broker.config.broker_permission):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.config.broker_ip1}] sending message is forbidden",
            )
        config = self.broker.topics.get(topic)
        created = config is None  # by this send: auto-created, or a group's retry topic
        config = self._topic_config(request, header, topic, config)
        if isinstance(config, RemotingCommand):
            return config
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(config.write_queue_nums)
        elif queue_id >= config.write_queue_nums:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, "
                f"topic[{topic}] has {config.write_queue_nums} write queues",
            )
        max_size = self.broker.store.config.max_message_size
        messages = messages_from_request(request, header, topic, queue_id, conn, max_size)
        if isinstance(messages, str):
            return response_to(request, ResponseCode.MESSAGE_ILLEGAL, messages)
        for msg in messages:  # as RocketMQ: a request's reply finds its cluster's reply topic by it
            msg.properties[PROPERTY_CLUSTER] = self.broker.config.broker_cluster_name
        refused = self._redirect(request, header, messages)
        if refused is not None:
            return refused
        outcome = self.broker.store.put_messages_or_wait(messages)
        if self.hold.waiting:
            # A consumer waits (long polling): dispatch now, so its answer is written in this
            # turn, before the producer's.
            self.broker.store.dispatch_pending()
        if created:  # as RocketMQ: registered before the answer, so its route is known at once
            return self._response_when_registered(request, outcome, queue_id)
        if type(outcome) is PutMessageResult:
            return self._response(request, outcome, queue_id)
        return self._response_when_flushed(request, outcome, queue_id)

    async def _response_when_flushed(self, request, pending_result, queue_id: int) -> RemotingCommand:
        return self._response(request, await pending_result, queue_id)

    async def _response_when_registered(self, request, outcome, queue_id: int) -> RemotingCommand:
        result = outcome if type(outcome) is PutMessageResult else await outcome
        await self.broker.registered()
        return self._response(request, result, queue_id)

    def _topic_config(self, request, header: SendMessageRequestHeader, topic: str, config):
        """The config the send writes to: ``config`` (the topic's, None for a topic the broker
        does not have, then created by the send and registered by ``send`` before the answer),
        or the refusal."""
        topics = self.broker.topics
        if config is None:
            if not tc.is_retry_topic(topic):
                config = topics.create_in_send(
                    topic, header.default_topic, header.default_topic_queue_nums, header.topic_sys_flag or 0
                )
            elif self.broker.groups.find(topic[len(tc.RETRY_GROUP_TOPIC_PREFIX) :]):
                config = topics.ensure(topic, 1, tc.PERM_READ | tc.PERM_WRITE)
            if config is not None:  # registered even when this send is refused further on
                self.broker.register_soon()
        if config is None:
            # A topic (or a group's retry topic) not created because it could not be written.
            not_kept = disk_full_refusal(self.broker.store, request)
            if not_kept is not None:
                return not_kept
            full = " (not created: the broker holds maxTopicCount topics)" if topics.is_full() else ""
            return response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{full}"
            )
        if not tc.is_writeable(config.perm):
            return response_to(
                request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return config

    def _redirect(
        self, request, header: SendMessageRequestHeader, messages: list[MessageExt]
    ) -> RemotingCommand | None:
        """Move a message to the topic it really belongs in now; a response when refused."""
        if len(messages) == 1:  # the common case first: a plain message stays where it is
            plain = messages[0]
            props = plain.properties
            if (
                const.PROPERTY_DELAY_TIME_LEVEL not in props
                and const.PROPERTY_TRANSACTION_PREPARED not in props
                and not tc.is_retry_topic(plain.topic)
            ):
                return None
        for msg in messages:
            level = msg.properties.get(const.PROPERTY_DELAY_TIME_LEVEL)
            if level is not None and not level.strip().lstrip("-").isdigit():
                return response_to(
                    request,
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"the {const.PROPERTY_DELAY_TIME_LEVEL} property {level!r} is not a number",
                )
        if len(messages) > 1 or request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            if any(m.delay_time_level > 0 for m in messages):
                return response_to(
                    request, ResponseCode.MESSAGE_ILLEGAL, "delayed messages cannot be batched"
                )
            return None
        msg = messages[0]
        if is_half_request(msg):
            to_half_message(msg)
            return None
        if tc.is_retry_topic(msg.topic):
            refused = self._retry_or_dlq(request, header, msg)
            if refused is not None:
                return refused
        to_schedule_message(msg, self.broker.schedule.max_level)
        return None

    def _retry_or_dlq(
        self, request, header: SendMessageRequestHeader, msg: MessageExt
    ) -> RemotingCommand | None:
        """A client re-sending to a retry topic itself: past its reconsume times it is dead."""
        group = msg.topic[len(tc.RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self.broker.groups.find(group)
        if group_config is None:
            return response_to(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, self.broker.groups.missing_remark(group)
            )
        max_times = group_config.max_reconsume_times(header.max_reconsume_times)
        if msg.reconsume_times >= max_times:
            if ensure_dlq_topic(self.broker, group) is None:
                return not_created(self.broker.store, request, tc.dlq_topic(group))
            msg.topic, msg.queue_id = tc.dlq_topic(group), 0
            msg.delay_time_level = 0
        return None

    def _response(self, request, result, queue_id: int) -> RemotingCommand:
        status = result.status
        code = ResponseCode.SUCCESS if status is PutMessageStatus.PUT_OK else put_status_code(status)
        if result.append is None:
            return response_to(request, code, result.remark or result.status.value)
        append = result.append
        # Positional (no transactionId): a keyword call costs more, once per message sent.
        fields = SendMessageResponseHeader(
            append.msg_id, queue_id, append.logics_offset, None, "DefaultRegion", "true"
        )
        remark = None if code == ResponseCode.SUCCESS else status.value
        return response_to(request, code, remark, fields)


def born_host_of(conn) -> tuple[str, int]:
    """The producer's address as a message's born host (parsed once per connection)."""
    host = conn.attributes.get("born_host")
    if host is None:
        host = conn.attributes["born_host"] = _born_host(conn.remote_addr)
    return host


def _born_host(addr: str) -> tuple[str, int]:
    # A connection without a usable address (a test transport) is the loopback, port 0.
    try:
        ip, port = parse_host(addr)
    except ValueError:
        return "127.0.0.1", 0
    return ip or "127.0.0.1", port
