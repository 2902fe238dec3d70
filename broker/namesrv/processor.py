"""Request handlers of the name server, one per RocketMQ request code it serves."""

from __future__ import annotations

import logging

from broker.common import fastjson
from broker.common.codes import RequestCode, ResponseCode
from broker.common.crc import crc32
from broker.common.names import topic_problem
from broker.common.register_body import RegisterBodyError, decode_register_body
from broker.common.request_headers import (
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.server import RemotingServer

from .kv_config import ORDER_TOPIC_NAMESPACE, KVConfigManager
from .register_checks import registration_problem
from .route_info import Registration, RouteInfoManager

log = logging.getLogger(__name__)


class NamesrvProcessor:
    def __init__(self, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        self.routes = routes
        self.kv = kv

    def register_all(self, server: RemotingServer) -> None:
        handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
        }
        for code, handler in handlers.items():
            server.register_processor(code, handler)
        server.close_listeners.append(self.routes.remove_connection)

    # -- brokers ------------------------------------------------------------------------------
    async def register_broker(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        # As RocketMQ's name server: a bodyCrc32 of 0 (or none, older brokers) is not checked.
        expected_crc = header.body_crc32
        if expected_crc and crc32(request.body) != expected_crc:
            return response_to(request, ResponseCode.SYSTEM_ERROR,
                               f"crc32 not match: the body's is {crc32(request.body)}, the header says "
                               f"{expected_crc}")  # fmt: skip
        try:
            body = decode_register_body(request.body, header.compressed)
        except RegisterBodyError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        # A registration names its cluster, its broker, its addresses and every topic it serves:
        # one unusable refuses the whole registration, so no client is ever routed to it.
        problem = registration_problem(header, body)
        if problem:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"registration refused: {problem}")
        reg = Registration(
            cluster=header.cluster_name,
            broker_name=header.broker_name,
            broker_addr=header.broker_addr,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_configs=body.topic_configs,
            data_version=body.data_version,
            connection=conn,
        )
        master = self.routes.register(reg)
        # The order-topic settings as a KVTable, or no body at all while none were ever put (as
        # RocketMQ's getKVListByNamespace answers null).
        order_conf = self.kv.namespace_table(ORDER_TOPIC_NAMESPACE)
        answer = fastjson.dumps({"table": order_conf}) if order_conf is not None else b""
        # As RocketMQ's RegisterBrokerResult: a slave learns its master's HA and remoting addresses.
        master_live = self.routes.live.get(master) if master else None
        answered = RegisterBrokerResponseHeader(master_live.ha_server_addr if master_live else "", master)
        return response_to(request, ext_fields=answered, body=answer)

    async def unregister_broker(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.unregister(header.cluster_name, header.broker_name, header.broker_addr, header.broker_id)
        return response_to(request)

    async def query_data_version(self, conn, request: RemotingCommand) -> RemotingCommand:
        addr = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields).broker_addr
        theirs = fastjson.loads(request.body) if request.body else None
        ours = self.routes.data_version_of(addr)
        changed = ours is None or theirs != ours
        self.routes.touch(addr)
        return response_to(
            request,
            ext_fields=QueryDataVersionResponseHeader(changed),
            body=fastjson.dumps(ours) if ours else b"",
        )

    async def wipe_write_perm(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.wipe_write_perm(header.broker_name)
        return response_to(request, ext_fields=WipeWritePermOfBrokerResponseHeader(count))

    # -- routes -------------------------------------------------------------------------------
    async def get_route(self, conn, request: RemotingCommand) -> RemotingCommand:
        topic = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields).topic
        problem = topic_problem(topic)
        if problem:
            return response_to(request, ResponseCode.SYSTEM_ERROR, problem)
        route = self.routes.topic_route(topic, self.kv.get(ORDER_TOPIC_NAMESPACE, topic))
        if route is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST,
                               f"No topic route info in name server for the topic: {topic}")  # fmt: skip
        return response_to(request, body=fastjson.dumps(route.to_json()))

    async def cluster_info(self, conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=fastjson.dumps(self.routes.cluster_info().to_json()))

    async def all_topics(self, conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=fastjson.dumps({"topicList": self.routes.all_topics()}))

    async def topics_by_cluster(self, conn, request: RemotingCommand) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields).cluster
        topics = self.routes.topics_of_cluster(cluster)
        return response_to(request, body=fastjson.dumps({"topicList": topics}))

    async def system_topics(self, conn, request: RemotingCommand) -> RemotingCommand:
        # RocketMQ's TopicList of cluster and broker names, with one broker's address: the one an
        # admin client then asks for the broker's own system topics.
        info = self.routes.cluster_info()
        names = sorted(set(info.clusters) | set(info.brokers))
        body = {"topicList": names, "brokerAddr": self.routes.any_broker_addr()}
        return response_to(request, body=fastjson.dumps(body))

    async def delete_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        topic = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields).topic
        problem = topic_problem(topic)
        if problem:
            return response_to(request, ResponseCode.SYSTEM_ERROR, problem)
        self.routes.delete_topic(topic)
        return response_to(request)

    # -- KV config ----------------------------------------------------------------------------
    async def put_kv(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.put(header.namespace, header.key, header.value)
        return response_to(request)

    async def get_kv(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        namespace, key = header.namespace, header.key
        value = self.kv.get(namespace, key)
        if value is None:
            return response_to(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return response_to(request, ext_fields=GetKVConfigResponseHeader(value))

    async def delete_kv(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.delete(header.namespace, header.key)
        return response_to(request)

    async def kv_list(self, conn, request: RemotingCommand) -> RemotingCommand:
        namespace = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields).namespace
        table = self.kv.namespace(namespace)
        if not table:
            return response_to(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}"
            )
        return response_to(request, body=fastjson.dumps({"table": table}))
