"""The admin client's core: requests over the SDK's ``ClientAPI``, each failure an operator message.

Every request goes through ``ClientAPI.invoke`` (the SDK's one wire and response check); here the
admin only adds what an operator needs to read: which kind of server failed (``name server``,
``broker``) and, for a server that does not answer, why in plain words. The name-server requests
(cluster info, topic list, topic route) and the resolution of ``-b``/``-c`` targets live here too,
as every group of requests builds on them.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from typing import Any

from broker.client.client_api import ClientAPI
from broker.client.errors import (
    BrokerUnreachableError,
    MQBrokerError,
    MQClientError,
    NameServerUnreachableError,
    NotFoundError,
)
from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode, ResponseCode
from broker.common.hosts import HostPort, parse_host, parse_host_list
from broker.common.request_headers import CommandHeader, GetRouteInfoRequestHeader
from broker.common.route import ClusterInfo, TopicRouteData
from broker.common.topic_config import RETRY_GROUP_TOPIC_PREFIX
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand
from broker.remoting.errors import RemotingError, RemotingTimeoutError
from broker.remoting.tls import ClientTls

from .parse import json_body

NAME_SERVER, BROKER = "name server", "broker"
_SUCCESS_ONLY = (ResponseCode.SUCCESS,)


class AdminCore:
    """Name servers and brokers asked over one ``RemotingClient``; reusable across calls.

    ``namesrv_addr`` is RocketMQ's ``host:port;host:port`` list. Name servers are tried in order
    (they hold the same state, N3), so one dead name server does not fail a command.
    """

    def __init__(
        self,
        namesrv_addr: str | Iterable[str],
        timeout: float = 3.0,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """``credentials``: sign every request with this ACL account (see ``SessionCredentials``).
        ``tls``: how to connect (default: ``ROCKETMQ_TLS_*`` from the environment)."""
        if not isinstance(namesrv_addr, str):
            namesrv_addr = ";".join(a.strip() for a in namesrv_addr)
        # An empty list is allowed: commands aimed at one broker address need no name server.
        self.namesrv_addrs = parse_host_list(namesrv_addr, "name server address list", error=MQClientError)
        self.timeout = timeout
        self.remoting = RemotingClient(credentials, tls=tls if tls is not None else ClientTls.from_env())
        self.api = ClientAPI(self.remoting)

    async def close(self) -> None:
        await self.remoting.close()

    # -- one request ---------------------------------------------------------------------------

    async def _request(
        self,
        addr: str,
        code: int,
        header: CommandHeader | None = None,
        body: bytes | None = None,
        allowed: tuple[int, ...] = _SUCCESS_ONLY,
        *,
        role: str = BROKER,
    ) -> RemotingCommand:
        """One request to the broker (or, with ``role=NAME_SERVER``, the name server) at ``addr``."""
        try:
            return await self.api.invoke(addr, code, header, body, int(self.timeout * 1000), allowed)
        except RemotingError as exc:
            # A broken connection must not be reused by the next call to this address.
            self.remoting.close_connection(addr)
            error_type = NameServerUnreachableError if role == NAME_SERVER else BrokerUnreachableError
            raise error_type(addr, _describe_remoting_error(exc, self.timeout)) from None
        except MQBrokerError as exc:
            raise MQBrokerError(exc.response_code, exc.remark, addr, role) from None

    async def _request_unless(
        self, addr: str, code: int, header: CommandHeader, refusals: tuple[int, ...]
    ) -> RemotingCommand | None:
        """A broker request whose refusals with one of ``refusals`` are answers too ("nothing
        there", "no consumer online"): ``None`` for those, the response on SUCCESS."""
        response = await self._request(addr, code, header, allowed=(ResponseCode.SUCCESS, *refusals))
        return None if response.code in refusals else response

    async def _broker_json(self, addr: str, code: int, header: CommandHeader | None = None) -> dict[str, Any]:
        return json_body(await self._request(addr, code, header), f"{BROKER} {addr}")

    async def _namesrv(
        self, code: int, header: CommandHeader | None = None, allowed: tuple[int, ...] = _SUCCESS_ONLY
    ) -> tuple[str, RemotingCommand]:
        """Ask the first name server that answers (its address, its answer); connection failures
        move to the next one."""
        if not self.namesrv_addrs:
            raise MQClientError("no name server address given (use -n host:port or set NAMESRV_ADDR)")
        failures: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                return addr, await self._request(addr, code, header, allowed=allowed, role=NAME_SERVER)
            except NameServerUnreachableError as exc:
                failures.append(exc.reason_text)
        raise NameServerUnreachableError(";".join(self.namesrv_addrs), "; ".join(failures))

    async def _namesrv_json(self, code: int, header: CommandHeader | None = None) -> dict[str, Any]:
        addr, response = await self._namesrv(code, header)
        return json_body(response, f"{NAME_SERVER} {addr}")

    async def _first_success(self, addrs: list[str], code: int, header: CommandHeader) -> dict[str, Any]:
        """The JSON body of the first broker answering SUCCESS; the last refusal is raised if none does."""
        last: MQBrokerError | None = None
        for addr in addrs:
            try:
                return await self._broker_json(addr, code, header)
            except MQBrokerError as exc:
                last = exc
        if last is None:
            raise NotFoundError("no broker to ask")
        raise last

    # -- the name server's tables ----------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo.from_json(await self._namesrv_json(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def topic_list(self) -> list[str]:
        raw = await self._namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(raw.get("topicList") or [])

    async def topic_route(self, topic: str) -> TopicRouteData:
        addr, response = await self._namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic),
            (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NotFoundError(f"no route for topic {topic!r} on the name server")
        return TopicRouteData.from_json(topic, json_body(response, f"{NAME_SERVER} {addr}"))

    async def _group_broker_addrs(self, group: str) -> list[str]:
        """Brokers that know a group: those of its retry topic, else every master."""
        try:
            addrs = (await self.topic_route(RETRY_GROUP_TOPIC_PREFIX + group)).master_addrs()
        except NotFoundError:
            addrs = []
        return addrs or (await self.cluster_info()).all_master_addrs()

    async def _known_broker_hosts(self) -> set[HostPort]:
        """Every broker address the name servers list, as (ip, port): brokers register IPv6 hosts
        with or without brackets, an offsetMsgId's store host is compared by value."""
        info = await self.cluster_info()
        hosts = set()
        for data in info.brokers.values():
            for addr in data.broker_addrs.values():
                try:
                    hosts.add(parse_host(addr))
                except ValueError:
                    continue
        return hosts

    # -- target resolution -------------------------------------------------------------------

    async def resolve_masters(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``-b`` wins over ``-c``; ``-c`` means every master of that cluster."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            addrs = known_cluster(await self.cluster_info(), cluster).master_addrs(cluster)
            if not addrs:
                raise NotFoundError(f"cluster {cluster!r} has no master broker")
            return addrs
        raise MQClientError("a broker address or a cluster name is required")

    async def resolve_all_addrs(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """Like ``resolve_masters`` but slaves included (read-only views of a cluster)."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            return known_cluster(await self.cluster_info(), cluster).all_addrs(cluster)
        raise MQClientError("a broker address or a cluster name is required")


def known_cluster(info: ClusterInfo, cluster: str) -> ClusterInfo:
    """``info`` when it knows ``cluster``: the route model answers an unknown cluster with no
    brokers, an operator naming one is told it does not exist."""
    if cluster not in info.clusters:
        raise NotFoundError(f"cluster {cluster!r} is not known to the name server")
    return info


def _describe_remoting_error(exc: RemotingError, timeout: float) -> str:
    # broker.remoting raises its errors "from None"; the OS error is still the context.
    cause = exc.__context__
    if isinstance(exc, RemotingTimeoutError) or isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, socket.gaierror):
        return f"unknown host: {cause.strerror or cause}"
    if isinstance(cause, OSError) and cause.strerror and not isinstance(cause, ssl.SSLError):
        return cause.strerror.lower()
    text = str(exc)  # a TLS failure: the remoting client's reading of it (broker.remoting.tls)
    addr = getattr(exc, "addr", "")
    return text.split(f"{addr}: ", 1)[-1] if addr else text
