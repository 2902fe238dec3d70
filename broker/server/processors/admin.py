"""Administration codes used by mqadmin and the console."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import orjson

from broker.common import fastjson
from broker.common import topic_config as tc
from broker.common.acl_rules import SUB
from broker.common.codes import RequestCode, ResponseCode
from broker.common.conf_file import ConfError, format_properties, parse_properties
from broker.common.java_enums import TOPIC_FILTER_TYPE
from broker.common.message_codec import decode_message, decode_offset_msg_id
from broker.common.request_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PurgeDamagedCommitLogRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
from broker.common.topic_config import TopicConfig
from broker.remoting.command import RemotingCommand, create_request, response_to
from broker.store.quarantine import PurgeRefused

from ..acl_stored import stored_message_refusal
from ..config_schema import FixedConfigKeyError
from ..subscription_manager import SubscriptionGroupConfig
from .disk_refusal import disk_full_refusal, not_written
from .name_checks import name_refusal

if TYPE_CHECKING:
    from ..controller import BrokerController


# Most queues one GET_CONSUME_STATS answer lists (~100 bytes each): a group consuming every topic
# of a full broker would otherwise make one request build hundreds of megabytes on the loop.
MAX_STATS_QUEUES = 16 * 1024

log = logging.getLogger(__name__)


def _mq(topic: str, broker_name: str, queue_id: int) -> dict:
    return {"brokerName": broker_name, "queueId": queue_id, "topic": topic}


class AdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    # -- topics -------------------------------------------------------------------------------
    async def create_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        topic = header.topic
        refused = name_refusal(request, (topic,))
        if refused is not None:
            return refused
        if topic == tc.AUTO_CREATE_TOPIC_KEY_TOPIC or (
            tc.is_system_topic(topic) and topic in self.broker.topics.table
        ):
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system topic"
            )
        config = TopicConfig(
            topic,
            header.read_queue_nums,
            header.write_queue_nums,
            header.perm,
            header.topic_filter_type,
            header.topic_sys_flag or 0,
            header.order,
        )
        problem = self._new_topic_problem(config)
        if problem is not None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, problem)
        full = disk_full_refusal(self.broker.store, request)
        if full is not None:
            return full
        if not self.broker.topics.update_durably(config):
            return not_written(self.broker.store, request, self.broker.topics.file.file)
        self.broker.register_soon()
        return response_to(request)

    def _new_topic_problem(self, config: TopicConfig) -> str | None:
        """Why UPDATE_AND_CREATE_TOPIC may not store ``config``, or None."""
        topic = config.topic_name
        if config.read_queue_nums < 1 or config.write_queue_nums < 1:
            return "queue numbers must be at least 1"
        # As RocketMQ's TopicFilterType.valueOf: never stored with a type it would not read back.
        bad_type = TOPIC_FILTER_TYPE.name_problem(config.topic_filter_type, "topicFilterType")
        if bad_type:
            return bad_type
        if topic not in self.broker.topics.table and self.broker.topics.is_full():
            return (
                f"the topic[{topic}] is not created: the broker holds {self.broker.topics.counted()} "
                f"topics (retry and DLQ topics not counted), "
                f"maxTopicCount={self.broker.config.max_topic_count}"
            )
        most = self.broker.config.max_topic_queue_nums
        if max(config.read_queue_nums, config.write_queue_nums) > most:
            return (
                f"the topic[{topic}] asks for {max(config.read_queue_nums, config.write_queue_nums)} "
                f"queues, more than maxTopicQueueNums={most}"
            )
        return None

    async def delete_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        topic = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields).topic
        refused = name_refusal(request, (topic,))
        if refused is not None:
            return refused
        if tc.is_system_topic(topic):
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is a system topic")
        self.broker.topics.delete(topic)
        self.broker.store.delete_topics({topic})
        self.broker.offsets.remove_topic(topic)
        self.broker.register_soon()
        return response_to(request)

    async def all_topic_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=fastjson.dumps(self.broker.topics.serialize_wrapper()))

    async def topic_stats(self, conn, request: RemotingCommand) -> RemotingCommand:
        topic = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields).topic
        refused = name_refusal(request, (topic,))
        if refused is not None:
            return refused
        config = self.broker.topics.get(topic)
        if config is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store, name = self.broker.store, self.broker.config.broker_name
        entries = []
        for queue_id in range(config.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            last = store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            stats = {
                "minOffset": store.get_min_offset_in_queue(topic, queue_id),
                "maxOffset": max_offset,
                "lastUpdateTimestamp": max(last, 0),
            }
            entries.append((_mq(topic, name, queue_id), stats))
        return response_to(request, body=fastjson.dumps({"offsetTable": fastjson.ObjectKeyMap(entries)}))

    async def topic_consume_by_who(self, conn, request: RemotingCommand) -> RemotingCommand:
        topic = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields).topic
        refused = name_refusal(request, (topic,))
        if refused is not None:
            return refused
        groups = self.broker.consumers.groups_subscribing(topic) | self.broker.offsets.groups_of_topic(topic)
        return response_to(request, body=fastjson.dumps({"groupList": sorted(groups)}))

    # -- groups -------------------------------------------------------------------------------
    async def create_group(self, conn, request: RemotingCommand) -> RemotingCommand:
        try:
            config = SubscriptionGroupConfig.from_json_dict(fastjson.loads(request.body))
        except (ValueError, TypeError, AttributeError) as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {exc}")
        problem = config.number_problem()
        if problem:
            refusal = f"bad subscription group config: {problem}"
            return response_to(request, ResponseCode.SYSTEM_ERROR, refusal)
        refused = name_refusal(request, groups=(config.group_name,))
        if refused is not None:
            return refused
        groups = self.broker.groups
        if config.group_name not in groups.table and groups.is_full():
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the group[{config.group_name}] is not created: the broker holds {len(groups.table)} "
                f"groups, maxSubscriptionGroupCount={self.broker.config.max_subscription_group_count}",
            )
        if not 0 <= config.retry_queue_nums <= self.broker.config.max_topic_queue_nums:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"retryQueueNums={config.retry_queue_nums} of the group[{config.group_name}] is not "
                f"between 0 and maxTopicQueueNums={self.broker.config.max_topic_queue_nums}",
            )
        full = disk_full_refusal(self.broker.store, request)
        if full is not None:
            return full
        if not groups.update_durably(config):
            return not_written(self.broker.store, request, groups.file.file)
        return response_to(request)

    async def delete_group(self, conn, request: RemotingCommand) -> RemotingCommand:
        group = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields).group_name
        refused = name_refusal(request, groups=(group,))
        if refused is not None:
            return refused
        self.broker.groups.delete(group)
        self.broker.offsets.remove_group(group)
        self.broker.stats.forget_group(group)
        return response_to(request)

    async def all_groups(self, conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=fastjson.dumps(self.broker.groups.wrapper()))

    async def consume_stats(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        group, only_topic = header.consumer_group, header.topic
        refused = name_refusal(request, (only_topic or None,), (group,))
        if refused is not None:
            return refused
        broker, store = self.broker, self.broker.store
        topics = {only_topic} if only_topic else broker.offsets.topics_of_group(group)
        info = broker.consumers.groups.get(group)
        if info and not only_topic:
            topics |= set(info.subscriptions)
        configs = [c for c in map(broker.topics.get, sorted(topics)) if c is not None]
        queues = sum(c.write_queue_nums for c in configs)
        if queues > MAX_STATS_QUEUES:  # refused whole rather than cut: a partial lag would be wrong
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the consume stats of group[{group}] would list {queues} queues, more than "
                f"{MAX_STATS_QUEUES}: ask for one topic at a time",
            )
        entries, consume_tps = [], 0.0
        for config in configs:
            topic = config.topic_name
            consume_tps += broker.stats.consume_tps(group, topic)
            for queue_id in range(config.write_queue_nums):
                broker_offset = store.get_max_offset_in_queue(topic, queue_id)
                # Messages retention deleted are not left to consume: a group behind the queue's
                # first message resumes there (its next pull is moved), so lag counts from it.
                consumer_offset = max(
                    broker.offsets.query(group, topic, queue_id),
                    store.get_min_offset_in_queue(topic, queue_id),
                )
                last = (
                    store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
                    if consumer_offset
                    else 0
                )
                wrapper = {
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": max(last, 0),
                }
                entries.append((_mq(topic, broker.config.broker_name, queue_id), wrapper))
        if not entries and only_topic and broker.topics.get(only_topic) is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{only_topic}] not exist")
        body = {"consumeTps": float(consume_tps), "offsetTable": fastjson.ObjectKeyMap(entries)}
        return response_to(request, body=fastjson.dumps(body))

    async def consumer_connections(self, conn, request: RemotingCommand) -> RemotingCommand:
        group = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        refused = name_refusal(request, groups=(group,))
        if refused is not None:
            return refused
        info = self.broker.consumers.groups.get(group)
        if info is None:
            return response_to(
                request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        body = {
            "connectionSet": [c.to_connection_json() for c in info.channels.values()],
            "subscriptionTable": info.subscription_table_json(),
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }
        return response_to(request, body=fastjson.dumps(body))

    async def producer_connections(self, conn, request: RemotingCommand) -> RemotingCommand:
        group = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields).producer_group
        refused = name_refusal(request, groups=(group,))
        if refused is not None:
            return refused
        channels = self.broker.producers.groups.get(group, {})
        body = {"connectionSet": [c.to_connection_json() for c in channels.values()]}
        return response_to(request, body=fastjson.dumps(body))

    async def reset_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        """Rewrite a group's offsets to the first message at/after a time (-1 = latest). Without
        isForce an offset only moves back, as in RocketMQ, so nothing unread is skipped."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        topic, group, timestamp, force = header.topic, header.group, header.timestamp, header.is_force
        refused = name_refusal(request, (topic,), (group,))
        if refused is not None:
            return refused
        config = self.broker.topics.get(topic)
        if config is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        full = disk_full_refusal(self.broker.store, request)
        if full is not None:
            return full
        store, entries = self.broker.store, []
        for queue_id in range(config.read_queue_nums):
            if timestamp < 0:
                offset = store.get_max_offset_in_queue(topic, queue_id)
            else:
                offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            current = self.broker.offsets.query(group, topic, queue_id)
            if not force and 0 <= current < offset:
                offset = current
            self.broker.offsets.commit(group, topic, queue_id, offset)
            entries.append((_mq(topic, self.broker.config.broker_name, queue_id), offset))
        body = fastjson.dumps({"offsetTable": fastjson.ObjectKeyMap(entries)})
        await self._tell_consumers(header, body)
        return response_to(request, body=body)

    async def _tell_consumers(self, header: ResetOffsetRequestHeader, body: bytes) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET to every online member of the group, with the request's
        header (isForce included, as RocketMQ's broker sends it) and the new offsets."""
        info = self.broker.consumers.groups.get(header.group)
        for channel in list(info.channels.values()) if info else []:
            try:
                channel.connection.invoke_oneway(
                    create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body)
                )
            except Exception:  # a client gone away picks the offsets up from the broker
                continue

    # -- broker -------------------------------------------------------------------------------
    async def runtime_info(self, conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=fastjson.dumps({"table": self.broker.runtime_info()}))

    async def purge_damaged_commit_log(self, conn, request: RemotingCommand) -> RemotingCommand:
        """Overwrite quarantined damaged commit-log data (``store.quarantine``): the operator's
        explicit, logged decision that those bytes are gone. The answer's body lists the ranges
        purged, as runtime info's ``commitLogDamagedDetail`` lists them."""
        from_offset = PurgeDamagedCommitLogRequestHeader.from_ext_fields(request.ext_fields).from_offset
        store = self.broker.store
        starts = [r.from_offset for r in store.quarantine.open_ranges()]
        if from_offset is not None and from_offset not in starts:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"no quarantined damaged range starts at commit-log offset {from_offset} "
                f"(open ranges start at {starts})",
            )
        # Writes and fsyncs a segment and the quarantine file: off the loop.
        try:
            purged = await asyncio.to_thread(store.purge_damaged_commit_log, from_offset)
        except PurgeRefused as exc:  # the bytes no longer look damaged: nothing was written
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        who = getattr(conn, "remote_addr", "?")
        account = request.ext_fields.get("AccessKey")
        by = f"{who} (AccessKey {account[:64]})" if account else who
        done = ", ".join(f"{r.from_offset}-{r.to_offset}" for r in purged) or "nothing open"
        log.warning("damaged commit-log data purged at the request of %s: %s", by, done)
        body = orjson.dumps({"purged": [r.to_json() for r in purged]})
        return response_to(request, body=body)

    async def get_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        """The values the running broker uses; values accepted but waiting for a restart are in
        the ``pendingRestart`` field (a JSON object), which RocketMQ's tools ignore."""
        text = format_properties(self.broker.config.as_properties())
        version = orjson.dumps(self.broker.topics.data_version.to_json()).decode()
        pending = self.broker.config_updater.pending
        waiting = orjson.dumps(pending, option=orjson.OPT_SORT_KEYS).decode() if pending else None
        header = GetBrokerConfigResponseHeader(version, waiting)
        return response_to(request, ext_fields=header, body=text.encode())

    async def update_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        updates = parse_properties((request.body or b"").decode(errors="replace"))
        if not updates:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "no key=value to update in the request body"
            )
        try:
            outcome = self.broker.config_updater.update(updates)
        except FixedConfigKeyError as exc:
            return response_to(request, ResponseCode.NO_PERMISSION, str(exc))
        except ConfError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        except OSError as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"cannot write broker.conf: {exc.strerror}"
            )
        return response_to(request, remark=outcome.remark())

    async def forward_to_client(self, conn, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY: ask the named client, relay its answer."""
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            direct = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
            group, client_id, msg_id = direct.consumer_group, direct.client_id or "", direct.msg_id
        else:
            running = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
            group, client_id, msg_id = running.consumer_group, running.client_id, None
        refused = name_refusal(request, groups=(group,))
        if refused is not None:
            return refused
        info = self.broker.consumers.groups.get(group)
        channel = info.channels.get(client_id) if info else None
        if channel is None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> not online")
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            # Only a stored message is handed over, never a body the caller sent: that would
            # deliver a message of any topic to another group's consumer.
            record = self._direct_message(conn, request, msg_id)
            if isinstance(record, RemotingCommand):
                return record
            request.body = record
        forwarded = create_request(request.code, dict(request.ext_fields), request.body)
        answer = await channel.connection.invoke(forwarded, 10_000)
        return response_to(request, answer.code, answer.remark, answer.ext_fields, answer.body)

    def _direct_message(self, conn, request: RemotingCommand, msg_id: str | None) -> bytes | RemotingCommand:
        """The stored record CONSUME_MESSAGE_DIRECTLY hands to a consumer, or the refusal: with ACL
        on, the account needs SUB on the topic the message belongs to."""
        try:
            _, offset = decode_offset_msg_id(msg_id or "")
        except ValueError:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"msgId {(msg_id or '')[:64]!r} is not a broker message id: CONSUME_MESSAGE_DIRECTLY "
                "hands the consumer the stored message it names",
            )
        record = self.broker.store.record_starting_at(offset)
        if record is None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "the message does not exist")
        msg = decode_message(record, read_body=False)
        refused = stored_message_refusal(self.broker, conn, request, msg, SUB)
        return record if refused is None else refused
