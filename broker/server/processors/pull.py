"""PULL_MESSAGE with tag filtering and long polling."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from broker.common import topic_config as tc
from broker.common.codes import ResponseCode
from broker.common.filter import FilterSyntaxError, TagFilter, is_tag_type
from broker.common.names import KNOWN_LEGAL_GROUPS, KNOWN_LEGAL_TOPICS, group_problem, topic_problem
from broker.common.pull_sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from broker.common.request_headers import PullMessageRequestHeader, PullMessageResponseHeader
from broker.common.request_headers.base import make_decoder
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.connection import failure_response
from broker.store.results import GetMessageStatus
from broker.store.running_flags import DISK_FULL

if TYPE_CHECKING:
    from ..controller import BrokerController

# Called directly (not through from_ext_fields): the pull is the hot path.
_decode_header = make_decoder(PullMessageRequestHeader)

_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Processors are made when the broker starts, once its hold service exists.
        assert broker.hold is not None
        self.hold = broker.hold

    def pull(self, conn, request: RemotingCommand) -> RemotingCommand | None:
        """Answers at once when there is something to read (or nothing may be waited for);
        otherwise parks the pull (long polling) and answers it on ``conn`` when a message
        arrives or the suspend time runs out."""
        header = _decode_header(request.ext_fields)
        group, topic, queue_id, offset = (
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.queue_offset,
        )
        sys_flag = header.sys_flag
        refusal = self._check(request, group, topic, queue_id)
        if refusal is not None:
            return refusal
        message_filter = self._filter(request, header)
        if isinstance(message_filter, RemotingCommand):
            return message_filter
        # A slave keeps no offset a pull carries (RocketMQ's storeOffsetEnable): its master's count.
        # Nor does a full disk (see disk_refusal): the pull is served, its offset is not kept.
        if (
            sys_flag & FLAG_COMMIT_OFFSET
            and header.commit_offset >= 0
            and not self.broker.replication.is_slave
            and not self.broker.store.running_flags.is_set(DISK_FULL)
        ):
            self.broker.commit_consumer_offset(group, topic, queue_id, header.commit_offset)
        read = functools.partial(self.broker.store.get_message, group, topic, queue_id, offset,
                                 header.max_msg_nums, message_filter)  # fmt: skip
        result = read()
        code = self._code(result, offset)
        if code != ResponseCode.SUCCESS and self.broker.replication.redirects_reads():
            # A slave whose master is up sends a consumer that found nothing back to it, rather
            # than holding the pull here (RocketMQ's PULL_RETRY_IMMEDIATELY, suggesting the master).
            return self._response(request, header, result, ResponseCode.PULL_RETRY_IMMEDIATELY)
        if code != ResponseCode.PULL_NOT_FOUND or not sys_flag & FLAG_SUSPEND:
            return self._response(request, header, result, code)
        hold_ms = header.suspend_timeout_millis
        if not self.broker.config.long_polling_enable:
            hold_ms = self.broker.config.short_polling_time_mills
        accepts = message_filter.is_matched_by_consume_queue
        deadline = time.monotonic() + hold_ms / 1000
        _HeldPull(self, conn, request, header, read, accepts, deadline).park()
        return None  # answered later, when woken

    def _response(self, request, header: PullMessageRequestHeader, result, code: int) -> RemotingCommand:
        suggest = 0  # the master, unless slave reads are on or this is a slave
        if self.broker.config.slave_read_enable or self.broker.replication.is_slave:
            suggest = self.broker.replication.suggest_broker_id(header.consumer_group, result)
        fields = PullMessageResponseHeader(
            result.next_begin_offset, result.min_offset, result.max_offset, suggest
        )
        if code == ResponseCode.SUCCESS:
            return response_to(request, code, None, fields, result.body())
        return response_to(request, code, result.status.value, fields)

    @staticmethod
    def _code(result, offset: int) -> int:
        if result.status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        return _STATUS_CODES[result.status]

    def _check(self, request, group: str, topic: str, queue_id: int) -> RemotingCommand | None:
        broker = self.broker
        # (name_refusal, spelled out: every pull); names seen legal before cost a set lookup each.
        if topic not in KNOWN_LEGAL_TOPICS or group not in KNOWN_LEGAL_GROUPS:
            problem = topic_problem(topic) or group_problem(group)
            if problem is not None:
                return response_to(request, ResponseCode.SYSTEM_ERROR, problem)
        if not tc.is_readable(broker.config.broker_permission):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.config.broker_ip1}] pulling message is forbidden",
            )
        group_config = broker.groups.for_reading(group)
        if group_config is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not group_config.consume_enable:
            return response_to(
                request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        config = broker.topics.get(topic)
        if config is None:
            return response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not tc.is_readable(config.perm):
            return response_to(
                request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        if queue_id < 0 or queue_id >= config.read_queue_nums:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{config.read_queue_nums}]",
            )
        return None

    def _filter(self, request, header: PullMessageRequestHeader):
        group, topic = header.consumer_group, header.topic
        if header.sys_flag & FLAG_SUBSCRIPTION:
            expression_type = header.expression_type or "TAG"
            expression = header.subscription
        else:
            info = self.broker.consumers.groups.get(group)
            subscription = info.subscriptions.get(topic) if info else None
            if subscription is None:
                return response_to(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist, group: {group}",
                )
            expression_type = subscription.get("expressionType") or "TAG"
            expression = subscription.get("subString")
        if is_tag_type(expression_type):
            try:
                return TagFilter(expression)
            except FilterSyntaxError as exc:
                reason = f"parse the consumer's subscription failed: {exc}"
                return response_to(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, reason)
        return self._sql_filter(request, header, expression_type, expression)

    def _sql_filter(self, request, header: PullMessageRequestHeader, expression_type: str, expression):
        if not self.broker.config.enable_property_filter or expression_type.upper() != "SQL92":
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type}",
            )
        try:
            return self.broker.filters.get(
                header.consumer_group, header.topic, expression or "", header.sub_version
            )
        except FilterSyntaxError as exc:
            reason = f"parse the consumer's subscription failed: {exc}"
            return response_to(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, reason)


class _HeldPull:
    """A pull waiting for a message (long polling), answered on its connection when woken.

    An object rather than a closure: a nested function that parks itself again refers to its own
    name, a reference cycle that only the garbage collector frees. With one per held pull, the
    broker ran a collection every few dozen messages, each in the path of the message at hand.
    """

    __slots__ = ("accepts", "conn", "deadline", "header", "processor", "read", "request")

    def __init__(
        self, processor: PullProcessor, conn, request, header: PullMessageRequestHeader, read, accepts,
        deadline: float,
    ) -> None:  # fmt: skip
        self.processor, self.conn, self.request, self.header = processor, conn, request, header
        self.read, self.accepts = read, accepts  # what it reads when woken; which messages wake it
        self.deadline = deadline

    def park(self) -> None:
        header = self.header
        self.processor.hold.park(
            header.topic, header.queue_id, header.queue_offset, self.deadline - time.monotonic(), self.wake,
            self.accepts, self.conn,
        )  # fmt: skip

    def wake(self, final: bool) -> None:
        processor, request = self.processor, self.request
        try:
            result = self.read()
            code = processor._code(result, self.header.queue_offset)
            if code == ResponseCode.PULL_NOT_FOUND and not final and self.deadline > time.monotonic():
                # Nothing readable for it after all (another tag with the same hash): wait on.
                self.park()
                return
            response = processor._response(request, self.header, result, code)
        except Exception as exc:  # the consumer hears of it rather than waiting forever
            response = failure_response(request, exc)
        self.conn.send_response(request, response)
