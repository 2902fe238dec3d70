"""Which topics and groups a request touches, with which permission, and which requests are for
admin accounts only: the broker's and name server's side of RocketMQ's PlainAccessResource.parse.

RocketMQ 4.9 checks sends (``topic`` PUB; a send to a retry topic is the group's SUB), pulls
(topic SUB and the consumer group SUB), send-backs (the group SUB and the original topic PUB),
message queries (topic SUB), heartbeats (each consumer group SUB and each subscribed topic SUB),
unregistering and listing a group's consumers (group SUB) and offset updates (group and topic
SUB). This adds what 4.9 leaves unchecked although it names a topic or group: batch and reply
sends (topic PUB, as a send), offset queries (group and topic SUB), queue locks (group SUB and
each queue's topic SUB), producer groups (any permission: in heartbeats, UNREGISTER_CLIENT,
END_TRANSACTION and the producer connection list, since a group's producer receives the
transaction checks of its half messages), and what reveals a group's clients, subscriptions or
offsets (CONSUME_MESSAGE_DIRECTLY, the consumer connection list, running info and consume stats:
the group SUB). Any request naming the broker's own topics or groups needs an admin account
(``broker_only_resource``).
Requests naming a stored message by offset
(send-backs, END_TRANSACTION, VIEW_MESSAGE_BY_ID, CONSUME_MESSAGE_DIRECTLY, and the messages a
QUERY_MESSAGE finds) are checked again by their handler against the topic that message belongs
to (``stored``). Requests naming nothing (route and statistics reads) need only a valid
signature.

A group is checked under its retry topic's name (``%RETRY%group``), as RocketMQ keys groups, so
a retry topic and its group are one resource.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.common import fastjson
from broker.common.acl_rules import ANY, PUB, SUB
from broker.common.codes import RequestCode as RC
from broker.common.request_headers import HeaderError, decode_send_request
from broker.common.system_names import CLIENT_INNER_PRODUCER_GROUP, SYSTEM_GROUP_PREFIX
from broker.common.topic_config import (
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
)
from broker.remoting.command import RemotingCommand

from .plain_config import group_resource

# RocketMQ 4.9's admin codes (Permission.ADMIN_CODE) and, beyond them, every request that
# changes what the broker or name server serves or who may use it: resetting offsets, the
# broker's write permission, the ACL itself, broker registration (and QUERY_DATA_VERSION, which
# keeps a broker's routes alive) and the name server's KV config, deleting topics anywhere,
# clean-up triggers and offset cloning. Also the reads of every topic's, group's or offset's
# record at once and of the broker's settings, which name no one resource to check and which
# only admin tools and brokers (their inner account, an admin) send.
ROCKETMQ_ADMIN_CODES = frozenset(
    {
        RC.UPDATE_AND_CREATE_TOPIC,
        RC.UPDATE_BROKER_CONFIG,
        RC.DELETE_TOPIC_IN_BROKER,
        RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RC.DELETE_SUBSCRIPTIONGROUP,
    }
)
ADMIN_CODES = ROCKETMQ_ADMIN_CODES | frozenset(
    {
        RC.INVOKE_BROKER_TO_RESET_OFFSET,
        RC.RESET_CONSUMER_OFFSET_IN_BROKER,
        RC.RESET_CONSUMER_OFFSET_IN_CONSUMER,
        RC.CLONE_GROUP_OFFSET,
        RC.WIPE_WRITE_PERM_OF_BROKER,
        RC.ADD_WRITE_PERM_OF_BROKER,
        RC.UPDATE_AND_CREATE_ACL_CONFIG,
        RC.DELETE_ACL_CONFIG,
        RC.GET_BROKER_CLUSTER_ACL_INFO,
        RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RC.GET_BROKER_CLUSTER_ACL_CONFIG,
        RC.REGISTER_BROKER,
        RC.UNREGISTER_BROKER,
        RC.DELETE_TOPIC_IN_NAMESRV,
        RC.PUT_KV_CONFIG,
        RC.DELETE_KV_CONFIG,
        RC.UPDATE_NAMESRV_CONFIG,
        RC.TRIGGER_DELETE_FILES,
        RC.CLEAN_EXPIRED_CONSUMEQUEUE,
        RC.CLEAN_UNUSED_TOPIC,
        RC.RESUME_CHECK_HALF_MESSAGE,
        RC.PURGE_DAMAGED_COMMIT_LOG,
        RC.QUERY_DATA_VERSION,
        RC.GET_ALL_TOPIC_CONFIG,
        RC.GET_ALL_CONSUMER_OFFSET,
        RC.GET_ALL_DELAY_OFFSET,
        RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RC.GET_BROKER_CONFIG,
        RC.GET_BROKER_EPOCH_CACHE,
    }
)

Needs = list[tuple[str, int]]  # (resource, permission bits)

# Topics the broker keeps for itself: half and op records of transactions, delayed and timer
# messages waiting to be due. Their messages belong to other topics (REAL_TOPIC), so a pull of
# them is for admin accounts only (the console's Delayed and Transactions pages), as RocketMQ
# 5's ACL keeps system topics from ordinary accounts. The trace topic is read with SUB as any
# topic: tracing clients write and read it.
_BROKER_ONLY_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC})
_BROKER_ONLY_PREFIXES = ("RMQ_SYS_", "rmq_sys_")


class ResourceError(ValueError):
    """A request whose resources cannot be read (a heartbeat body that is not JSON)."""


def topic_needs(topic: str | None, perm: int) -> Needs:
    """``perm`` on ``topic`` (the group's SUB for a retry topic)."""
    return _topic_or_retry(topic, perm)


def _topic_or_retry(topic: str | None, perm: int) -> Needs:
    if not topic:
        return []
    # A send to a retry topic is a consumer returning a message to its group: the group's SUB.
    return [(topic, SUB if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else perm)]


def _group(group: str | None) -> Needs:
    return [(group_resource(group), SUB)] if group else []


def _send(request: RemotingCommand) -> Needs:
    # The topic as the send handlers read it (V1 or one-letter V2 names, whatever the code): a
    # second reading here could name another topic than the one the message is stored in.
    try:
        header = decode_send_request(request.ext_fields or {})
    except HeaderError as exc:
        raise ResourceError(f"the header of send request {request.code} is not valid: {exc}") from None
    return _topic_or_retry(header.topic, PUB) + _system_producer_group(header.producer_group)


def _system_producer_group(group: str | None) -> Needs:
    # Only the broker's own groups are checked on a send (RocketMQ checks no producer group
    # there), so that a send naming one needs an admin account as every other request does.
    return [(group_resource(group), PUB)] if group and _is_broker_group(group) else []


def _pull(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _topic_or_retry(fields.get("topic"), SUB) + _group(fields.get("consumerGroup"))


def _send_back(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _group(fields.get("group")) + _topic_or_retry(fields.get("originTopic"), PUB)


def _query(request: RemotingCommand) -> Needs:
    return _topic_or_retry(request.ext_fields.get("topic"), SUB)


def _producer_group(group: object) -> Needs:
    # Any permission on the group (PUB or SUB, as accounts list groups), as END_TRANSACTION's: a
    # producer registered under a group receives the transaction checks of its half messages.
    # Every client registers CLIENT_INNER_PRODUCER (its own send-backs); no half message names it.
    if not group or not isinstance(group, str) or group == CLIENT_INNER_PRODUCER_GROUP:
        return []
    return [(group_resource(group), ANY)]


def _end_transaction(request: RemotingCommand) -> Needs:
    # The half message's own topic is checked by the handler once the message is found.
    return _producer_group(request.ext_fields.get("producerGroup"))


def _consumer_group(request: RemotingCommand) -> Needs:
    return _group(request.ext_fields.get("consumerGroup"))


def _consume_stats(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _group(fields.get("consumerGroup")) + _topic_or_retry(fields.get("topic"), SUB)


def _unregister(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _group(fields.get("consumerGroup")) + _producer_group(fields.get("producerGroup"))


def _producer_connections(request: RemotingCommand) -> Needs:
    return _producer_group(request.ext_fields.get("producerGroup"))


def _json_body(request: RemotingCommand) -> dict:
    try:
        body = fastjson.loads(request.body) if request.body else {}
    except Exception:
        raise ResourceError(f"the body of request {request.code} is not JSON") from None
    if not isinstance(body, dict):
        raise ResourceError(f"the body of request {request.code} is not a JSON object")
    return body


def _heartbeat(request: RemotingCommand) -> Needs:
    needs: Needs = []
    body = _json_body(request)
    for producer in body.get("producerDataSet") or ():
        if isinstance(producer, dict):
            needs += _producer_group(producer.get("groupName"))
    for consumer in body.get("consumerDataSet") or ():
        if not isinstance(consumer, dict):
            continue
        needs += _group(consumer.get("groupName"))
        for subscription in consumer.get("subscriptionDataSet") or ():
            if isinstance(subscription, dict):
                needs += _topic_or_retry(subscription.get("topic"), SUB)
    return needs


def _queue_locks(request: RemotingCommand) -> Needs:
    body = _json_body(request)
    needs = _group(body.get("consumerGroup"))
    for mq in body.get("mqSet") or ():
        if isinstance(mq, dict):
            needs += _topic_or_retry(mq.get("topic"), SUB)
    return needs


RESOURCE_READERS: dict[int, Callable[[RemotingCommand], Needs]] = {
    RC.SEND_MESSAGE: _send,
    RC.SEND_BATCH_MESSAGE: _send,
    RC.SEND_REPLY_MESSAGE: _send,
    RC.SEND_MESSAGE_V2: _send,
    RC.SEND_REPLY_MESSAGE_V2: _send,
    RC.PULL_MESSAGE: _pull,
    RC.CONSUMER_SEND_MSG_BACK: _send_back,
    RC.QUERY_MESSAGE: _query,
    RC.HEART_BEAT: _heartbeat,
    RC.UNREGISTER_CLIENT: _unregister,
    RC.GET_CONSUMER_LIST_BY_GROUP: _consumer_group,
    RC.GET_CONSUMER_CONNECTION_LIST: _consumer_group,
    RC.GET_CONSUMER_RUNNING_INFO: _consumer_group,
    RC.GET_CONSUME_STATS: _consume_stats,
    RC.GET_PRODUCER_CONNECTION_LIST: _producer_connections,
    RC.QUERY_TOPIC_CONSUME_BY_WHO: _query,
    RC.UPDATE_CONSUMER_OFFSET: _pull,
    RC.QUERY_CONSUMER_OFFSET: _pull,
    RC.LOCK_BATCH_MQ: _queue_locks,
    RC.END_TRANSACTION: _end_transaction,
    RC.CONSUME_MESSAGE_DIRECTLY: _consumer_group,
    RC.UNLOCK_BATCH_MQ: _queue_locks,
}


def _is_broker_group(group: str) -> bool:
    return group.startswith(SYSTEM_GROUP_PREFIX)


def _is_broker_topic(topic: str) -> bool:
    return topic in _BROKER_ONLY_TOPICS or (topic.startswith(_BROKER_ONLY_PREFIXES) and topic != TRACE_TOPIC)


def broker_only_resource(needs: Needs) -> str | None:
    """The first of ``needs`` the broker keeps for itself (a system topic, or a ``CID_RMQ_SYS_``
    group such as the transaction checker's), which any request naming needs an admin account
    for, or None: an offset committed, a queue locked or a subscription made there by another
    account would stop the broker's own work (the checks of every producer's half messages)."""
    for resource, _perm in needs:
        if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
            if _is_broker_group(resource[len(RETRY_GROUP_TOPIC_PREFIX) :]):
                return resource
        elif _is_broker_topic(resource):
            return resource
    return None


def needed_resources(request: RemotingCommand) -> Needs:
    """The (resource, permission) pairs ``request`` needs; raises ``ResourceError``."""
    reader = RESOURCE_READERS.get(request.code)
    return reader(request) if reader is not None else []


def describe_resource(resource: str) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return f"group {resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic {resource}"
