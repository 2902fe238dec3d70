"""Administration API over the remoting protocol (RocketMQ's ``DefaultMQAdminExt``).

``MQAdmin`` (blocking) and ``AsyncMQAdmin`` (asyncio) talk to name servers and brokers with
RocketMQ's admin request codes over the SDK's ``ClientAPI`` and return typed results
(:mod:`.results`, and the route model of :mod:`broker.common.route`); they never print. The
``mqadmin`` CLI and the web console are both thin layers over them. Every failure is an error of
the client's one tree (:mod:`broker.client.errors`) whose message says which address failed and
why, or which RocketMQ response code a server answered with.

The requests are grouped by concern: :mod:`.core` (the request path, name-server tables, target
resolution), :mod:`.topics` (brokers and topics), :mod:`.groups` (groups and offsets),
:mod:`.messages` (message lookups, pulls, transactions), :mod:`.acl` (the plain ACL's accounts and
white list).
"""

from broker.client.errors import (
    BrokerUnreachableError,
    MQBrokerError,
    MQClientError,
    NameServerUnreachableError,
    NotFoundError,
)

from .acl import AclConfig, AclInputError, AclVersion, BrokerOutcome, PlainAccessConfig
from .async_admin import AsyncMQAdmin
from .parse import parse_timestamp, runtime_figure
from .results import (
    BrokerConfigState,
    BrokerSummary,
    ClientConnection,
    ConsumeProgress,
    ConsumerConnection,
    ConsumerGroupSummary,
    DamagedCommitLogRange,
    ProducerConnection,
    PullResult,
    QueueConsumeProgress,
    QueueOffsetStatus,
    ResetOffsetEntry,
    Subscription,
    TopicStatus,
)
from .sync_admin import MQAdmin

__all__ = [
    "AclConfig",
    "AclInputError",
    "AclVersion",
    "AsyncMQAdmin",
    "BrokerConfigState",
    "BrokerOutcome",
    "BrokerSummary",
    "BrokerUnreachableError",
    "ClientConnection",
    "ConsumeProgress",
    "ConsumerConnection",
    "ConsumerGroupSummary",
    "DamagedCommitLogRange",
    "MQAdmin",
    "MQBrokerError",
    "MQClientError",
    "NameServerUnreachableError",
    "NotFoundError",
    "PlainAccessConfig",
    "ProducerConnection",
    "PullResult",
    "QueueConsumeProgress",
    "QueueOffsetStatus",
    "ResetOffsetEntry",
    "Subscription",
    "TopicStatus",
    "parse_timestamp",
    "runtime_figure",
]
