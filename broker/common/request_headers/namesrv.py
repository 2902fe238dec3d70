"""Headers of the name server's requests (broker registration, routes, KV config)."""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, absent, header, nonempty


@header
class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103); the body is a RegisterBrokerBody (topic configs, filter servers)."""

    broker_name: str = nonempty()
    broker_addr: str = nonempty()
    cluster_name: str = absent("DefaultCluster")
    ha_server_addr: str = absent("")
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0


@header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str = nonempty()
    broker_addr: str = nonempty()
    cluster_name: str = absent("")
    broker_id: int


@header
class QueryDataVersionRequestHeader(CommandHeader):
    """QUERY_DATA_VERSION (322); the body is the broker's DataVersion."""

    broker_name: str = absent("")
    broker_addr: str = nonempty()
    cluster_name: str = absent("")
    broker_id: int = absent(0)


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@header
class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str = nonempty()


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV (216); with a cluster, only that cluster's brokers drop the topic."""

    topic: str = nonempty()
    cluster_name: str | None = None


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = nonempty()


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str = nonempty()


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int


@header
class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str = nonempty()
    key: str = nonempty()
    value: str = absent("")


@header
class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str = nonempty()
    key: str = nonempty()


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str = nonempty()
    key: str = nonempty()


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str = nonempty()
