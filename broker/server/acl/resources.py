"""Which topics and groups a request touches, with which permission, and which requests are for
admin accounts only: the broker's and name server's side of RocketMQ's PlainAccessResource.parse.

RocketMQ 4.9 checks sends (``topic`` PUB; a send to a retry topic is the group's SUB), pulls
(topic SUB and the consumer group SUB), send-backs (the group SUB and the original topic PUB),
message queries (topic SUB), heartbeats (each consumer group SUB and each subscribed topic SUB),
unregistering and listing a group's consumers (group SUB) and offset updates (group and topic
SUB). This adds what 4.9 leaves unchecked although it names a topic or group: batch and reply
sends (topic PUB, as a send), offset queries (group and topic SUB), queue locks (group SUB and
each queue's topic SUB), END_TRANSACTION (any permission on the producer group) and
CONSUME_MESSAGE_DIRECTLY (the group SUB). Requests naming a stored message by offset
(send-backs, END_TRANSACTION, VIEW_MESSAGE_BY_ID, CONSUME_MESSAGE_DIRECTLY, and the messages a
QUERY_MESSAGE finds) are checked again by their handler against the topic that message belongs
to (``stored``). Requests naming nothing (route and statistics reads) need only a valid
signature.

A group is checked under its retry topic's name (``%RETRY%group``), as RocketMQ keys groups, so
a retry topic and its group are one resource.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.common.acl_rules import ANY, PUB, SUB
from broker.common.codes import RequestCode as RC
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX
from broker.remoting import fastjson
from broker.remoting.command import RemotingCommand

from .plain_config import group_resource

# RocketMQ 4.9's admin codes (Permission.ADMIN_CODE) and, beyond them, every request that
# changes what the broker or name server serves or who may use it: resetting offsets, the
# broker's write permission, the ACL itself, broker registration and the name server's KV
# config, deleting topics anywhere, clean-up triggers and offset cloning.
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
    }
)

Needs = list[tuple[str, int]]  # (resource, permission bits)


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
    return _topic_or_retry(request.ext_fields.get("topic"), PUB)


def _send_v2(request: RemotingCommand) -> Needs:
    return _topic_or_retry(request.ext_fields.get("b"), PUB)


def _pull(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _topic_or_retry(fields.get("topic"), SUB) + _group(fields.get("consumerGroup"))


def _send_back(request: RemotingCommand) -> Needs:
    fields = request.ext_fields
    return _group(fields.get("group")) + _topic_or_retry(fields.get("originTopic"), PUB)


def _query(request: RemotingCommand) -> Needs:
    return _topic_or_retry(request.ext_fields.get("topic"), SUB)


def _end_transaction(request: RemotingCommand) -> Needs:
    # Any permission on the producer group (PUB or SUB, as accounts list groups): not DENY. The
    # half message's own topic is checked by the handler once the message is found.
    group = request.ext_fields.get("producerGroup")
    return [(group_resource(group), ANY)] if group else []


def _consumer_group(request: RemotingCommand) -> Needs:
    return _group(request.ext_fields.get("consumerGroup"))


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
    for consumer in _json_body(request).get("consumerDataSet") or ():
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
    RC.SEND_MESSAGE_V2: _send_v2,
    RC.SEND_REPLY_MESSAGE_V2: _send_v2,
    RC.PULL_MESSAGE: _pull,
    RC.CONSUMER_SEND_MSG_BACK: _send_back,
    RC.QUERY_MESSAGE: _query,
    RC.HEART_BEAT: _heartbeat,
    RC.UNREGISTER_CLIENT: _consumer_group,
    RC.GET_CONSUMER_LIST_BY_GROUP: _consumer_group,
    RC.UPDATE_CONSUMER_OFFSET: _pull,
    RC.QUERY_CONSUMER_OFFSET: _pull,
    RC.LOCK_BATCH_MQ: _queue_locks,
    RC.END_TRANSACTION: _end_transaction,
    RC.CONSUME_MESSAGE_DIRECTLY: _consumer_group,
    RC.UNLOCK_BATCH_MQ: _queue_locks,
}


def needed_resources(request: RemotingCommand) -> Needs:
    """The (resource, permission) pairs ``request`` needs; raises ``ResourceError``."""
    reader = RESOURCE_READERS.get(request.code)
    return reader(request) if reader is not None else []


def describe_resource(resource: str) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return f"group {resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic {resource}"
