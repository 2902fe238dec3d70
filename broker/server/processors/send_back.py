"""CONSUMER_SEND_MSG_BACK (36): a consumer could not process a message; try it again later.

The broker reads the message back by commit-log offset and writes a copy to ``%RETRY%<group>``
through the delay mechanism (level ``3 + reconsumeTimes`` unless the client chose one), with
the reconsume count + 1 and the original topic and id in RETRY_TOPIC / ORIGIN_MESSAGE_ID. Once
the count reaches the group's max reconsume times (or the client asks with a level < 0) the
copy goes to ``%DLQ%<group>`` instead, where nothing consumes it automatically.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.acl_rules import PUB, SUB
from broker.common.codes import ResponseCode
from broker.common.message import MessageExt
from broker.common.names import topic_problem
from broker.common.request_headers import ConsumerSendMsgBackRequestHeader
from broker.remoting.command import RemotingCommand, response_to

from .. import trace_writer
from ..acl_stored import stored_message_refusal
from ..schedule_message import to_schedule_message
from .disk_refusal import disk_full_refusal, not_created
from .name_checks import name_refusal
from .send import ensure_dlq_topic, ensure_system_topic, put_status_code

if TYPE_CHECKING:
    from ..controller import BrokerController
    from ..subscription_manager import SubscriptionGroupConfig

log = logging.getLogger(__name__)
FIRST_RETRY_DELAY_LEVEL = 3  # 10 s with the default levels


class SendBackProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def send_back(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        group_config = self._group_or_refusal(request, header)
        if isinstance(group_config, RemotingCommand):
            return group_config
        broker = self.broker
        if group_config.retry_queue_nums <= 0:
            return response_to(request)  # the group opted out of retries: drop, as RocketMQ
        original = broker.store.message_starting_at(header.offset)
        if original is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        # The copy becomes the group's to read: the message's own topic needs PUB and SUB.
        refused = stored_message_refusal(broker, conn, request, original, PUB, SUB)
        if refused is not None:
            return refused
        # A write: refused on a full disk before its retry or DLQ topic is made (it could not be
        # written either).
        full = disk_full_refusal(broker.store, request)
        if full is not None:
            return full
        max_times = group_config.max_reconsume_times(header.max_reconsume_times)
        dead = original.reconsume_times >= max_times or header.delay_level < 0
        new_topic = broker.topics.get((tc.dlq_topic if dead else tc.retry_topic)(header.group)) is None
        if dead:
            ensure_dlq_topic(broker, header.group)
            target = self._copy(original, tc.dlq_topic(header.group), 0)
        else:
            retry = self._retry_copy(request, header, group_config, original)
            if isinstance(retry, RemotingCommand):
                return retry
            target = retry
        result = await broker.store.put_messages_async([target])
        if not result.ok:
            return response_to(
                request,
                put_status_code(result.status) or ResponseCode.SYSTEM_ERROR,
                result.remark or result.status.value,
            )
        # Once tracing is on in the cluster (the trace topic exists here), retries and dead
        # letters join the message's trace: only the broker sees them happen.
        if broker.topics.get(tc.TRACE_TOPIC) is not None:
            kind = trace_writer.DLQ if tc.is_dlq_topic(target.topic) else trace_writer.RETRY
            await trace_writer.write_trace_record(broker, original, kind, header.group)
        if new_topic:  # as RocketMQ: registered before the answer, so its route is known at once
            await broker.registered()
        return response_to(request)

    def _retry_copy(
        self,
        request: RemotingCommand,
        header: ConsumerSendMsgBackRequestHeader,
        group_config: SubscriptionGroupConfig,
        original: MessageExt,
    ) -> MessageExt | RemotingCommand:
        """The copy to write to the group's retry topic (made now if need be), due after its
        delay level; or the refusal."""
        broker = self.broker
        retry = ensure_system_topic(
            broker, tc.retry_topic(header.group), group_config.retry_queue_nums, tc.PERM_READ | tc.PERM_WRITE
        )
        if retry is None:  # the disk filled since the check above
            return not_created(broker.store, request, tc.retry_topic(header.group))
        if not tc.is_writeable(retry.perm):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{retry.topic_name}] sending message is forbidden",
            )
        target = self._copy(original, retry.topic_name, random.randrange(max(1, retry.write_queue_nums)))
        target.delay_time_level = header.delay_level or FIRST_RETRY_DELAY_LEVEL + original.reconsume_times
        to_schedule_message(target, broker.schedule.max_level)
        return target

    def _group_or_refusal(
        self, request: RemotingCommand, header: ConsumerSendMsgBackRequestHeader
    ) -> SubscriptionGroupConfig | RemotingCommand:
        """The group's config, or the refusal of what the header names (names, the group, the
        broker's write permission)."""
        refused = name_refusal(request, (header.origin_topic,), (header.group,))
        if refused is not None:
            return refused
        too_long = topic_problem(tc.retry_topic(header.group))  # %RETRY% is longer than %DLQ%
        if too_long:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the group[{header.group}] has no retry or dead-letter topic: {too_long}",
            )
        group_config = self.broker.groups.find(header.group)
        if group_config is None:
            return disk_full_refusal(self.broker.store, request) or response_to(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                self.broker.groups.missing_remark(header.group),
            )
        if not tc.is_writeable(self.broker.config.broker_permission):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.config.broker_ip1}] sending message is forbidden",
            )
        return group_config

    @staticmethod
    def _copy(original: MessageExt, topic: str, queue_id: int) -> MessageExt:
        props = dict(original.properties)
        props.setdefault(const.PROPERTY_RETRY_TOPIC, original.topic)
        # The first send-back names the broker's id of the message; later ones keep that one.
        props.setdefault(const.PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id)
        props[const.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        props.pop(const.PROPERTY_DELAY_TIME_LEVEL, None)
        props.pop(const.PROPERTY_REAL_TOPIC, None)
        props.pop(const.PROPERTY_REAL_QUEUE_ID, None)
        return original.copy_for_store(topic, queue_id, props, reconsume_times=original.reconsume_times + 1)
