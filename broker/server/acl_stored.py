"""Permissions on the stored message a request names by commit-log offset or message id.

The guard checks what a request's header names; a send-back, END_TRANSACTION,
VIEW_MESSAGE_BY_ID or CONSUME_MESSAGE_DIRECTLY names a message by offset instead, and a
QUERY_MESSAGE of a broker-internal topic finds messages of other topics. RocketMQ 4.9 checks
none of them, so an account denied a topic could read it by offset, copy it into its own retry
topic or commit someone else's half message. Here the handler, once it has the message, checks
the topic the message belongs to: SUB to read it, PUB and SUB to send it back (the copy becomes
the group's to read), PUB to end a transaction. The checks use only the stored message, so
Apache clients send nothing new.

A half or delayed message belongs to its REAL_TOPIC, not to the broker's internal topic that
holds it until it is committed or due.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.acl.guard import peer_host
from broker.acl.resources import Needs, topic_needs
from broker.acl.validator import AclRefusal, check_stored_resources
from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.acl_rules import SUB
from broker.common.codes import ResponseCode
from broker.common.message import MessageExt
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.connection import RemotingConnection

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)

# Topics the broker holds messages in on behalf of another topic (named in REAL_TOPIC).
_HOLDING_TOPICS = frozenset({tc.TRANS_HALF_TOPIC, tc.SCHEDULE_TOPIC})


def owning_topic(msg: MessageExt) -> str:
    """The topic ``msg`` belongs to for permissions."""
    real = msg.properties.get(const.PROPERTY_REAL_TOPIC)
    return real if real and msg.topic in _HOLDING_TOPICS else msg.topic


def stored_message_refusal(
    broker: BrokerController, conn: RemotingConnection, request: RemotingCommand, msg: MessageExt, *perms: int
) -> RemotingCommand | None:
    """NO_PERMISSION when the request's account lacks any of ``perms`` on the topic ``msg``
    belongs to; None when allowed or when ACL is off."""
    reason = _refusal_reason(broker, conn, request, msg, perms)
    if reason is None:
        return None
    log.info(
        "ACL refused request code %d from %s (the message at offset %d): %s",
        request.code,
        conn.remote_addr,
        msg.commitlog_offset,
        reason,
    )
    return response_to(request, ResponseCode.NO_PERMISSION, reason)


def may_read(
    broker: BrokerController, conn: RemotingConnection, request: RemotingCommand, msg: MessageExt
) -> bool:
    """Whether the request's account may read ``msg`` (SUB on its topic); a query leaves out,
    without logging each, what it may not."""
    return _refusal_reason(broker, conn, request, msg, (SUB,)) is None


def _refusal_reason(
    broker: BrokerController,
    conn: RemotingConnection,
    request: RemotingCommand,
    msg: MessageExt,
    perms: tuple[int, ...],
) -> str | None:
    if broker.acl is None:
        return None
    topic = owning_topic(msg)
    needs: Needs = [need for perm in perms for need in topic_needs(topic, perm)]
    try:
        check_stored_resources(broker.acl.current, request, peer_host(conn), needs)
    except AclRefusal as exc:
        return str(exc)
    return None
