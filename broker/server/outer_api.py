"""Every request the broker sends to other processes (RocketMQ's BrokerOuterAPI): to the name
servers (REGISTER_BROKER, UNREGISTER_BROKER, GET_BROKER_CLUSTER_INFO), to its master (the
metadata a slave copies, the offsets it hands back, the master's runtime info and config) and to
the controllers (through :attr:`BrokerOuterAPI.controller`, the controller client over the same
connections).

One place decides how the broker's outbound connections are made: signed with the broker's own
account (innerAccessKey/innerSecretKey; a name server or controller with ACL on takes only admin
accounts) and over TLS as ``BrokerConfig.client_tls`` says. One place checks an answer:
:meth:`BrokerOuterAPI.call` returns it when ``.ok`` and raises ``MQBrokerError`` (code, remark,
which server) when not; a server that does not answer raises ``RemotingError``. Both are in the
one error tree of :mod:`broker.common.errors`, so a caller that only logs catches ``MQError``.

Each part of the broker that calls out (registration, slave sync, controller mode, the slave
identity check before start) holds its own instance: they start and stop at different times,
and closing one's connections never cuts another's request.

The connections are built by :func:`broker.acl.outbound.outbound_client`, which the
controller's own outer API (``broker.controller.outer_api``) shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.acl.outbound import outbound_client
from broker.common import fastjson
from broker.common.codes import RequestCode
from broker.common.errors import MQBrokerError, MQClientError
from broker.common.request_headers import (
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.common.request_headers.base import CommandHeader
from broker.controller.client import ControllerClient
from broker.remoting.client import DEFAULT_TIMEOUT_MS
from broker.remoting.command import RemotingCommand, create_request

if TYPE_CHECKING:
    from .config import BrokerConfig

UNREGISTER_TIMEOUT_MS = 2000  # at shutdown: a name server that is down must not hold the stop
NAME_SERVER = "name server"
MASTER = "master"
BROKER = "broker"  # a broker asked as itself, not as this one's master


class BodyError(MQClientError):
    """An answer whose body cannot be used (too large, not the JSON object asked for)."""


class BrokerOuterAPI:
    def __init__(self, config: BrokerConfig) -> None:
        """Raises ``ConfError`` for unusable TLS or ACL settings (the broker's start reports them)."""
        self.config = config
        self.remoting = outbound_client(config.inner_access_key, config.inner_secret_key, config.client_tls())
        self._controller: ControllerClient | None = None

    @property
    def controller(self) -> ControllerClient:
        """The controllers' client (``controllerAddr``), signed and secured as every other call."""
        if self._controller is None:
            self._controller = ControllerClient(self.config.controller_addrs, self.remoting)
        return self._controller

    async def close(self) -> None:
        await self.remoting.close()

    # -- the one way to ask and check ------------------------------------------------------------
    async def call(
        self,
        addr: str,
        code: int,
        header: CommandHeader | None = None,
        body: bytes = b"",
        *,
        role: str,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> RemotingCommand:
        """The answer of ``addr`` (a ``role``: "name server", "master") when it is a success;
        a refusal raises ``MQBrokerError``, no answer ``RemotingError``."""
        response = await self.remoting.invoke(addr, create_request(code, header, body), timeout_ms)
        if not response.ok:
            raise MQBrokerError(response.code, response.remark, addr, role)
        return response

    async def _bounded_body(self, addr: str, code: int, limit: int, role: str, timeout_ms: int) -> bytes:
        body = (await self.call(addr, code, role=role, timeout_ms=timeout_ms)).body or b""
        if len(body) > limit:
            raise BodyError(f"{role} {addr} answered {len(body)} bytes, more than {limit}")
        return body

    async def _json_object(self, addr: str, code: int, role: str = MASTER) -> dict:
        response = await self.call(addr, code, role=role)
        body = fastjson.loads(response.body) if response.body else {}
        if not isinstance(body, dict):
            raise BodyError(f"{role} {addr} answered request {code} with no JSON object")
        return body

    # -- name servers ----------------------------------------------------------------------------
    async def register_broker(
        self, namesrv: str, header: RegisterBrokerRequestHeader, body: bytes
    ) -> RemotingCommand:
        """REGISTER_BROKER to one name server; its answer names the set's master and HA address."""
        return await self.call(namesrv, RequestCode.REGISTER_BROKER, header, body, role=NAME_SERVER)

    async def unregister_broker(self, namesrv: str, header: UnRegisterBrokerRequestHeader) -> None:
        await self.call(
            namesrv, RequestCode.UNREGISTER_BROKER, header, role=NAME_SERVER, timeout_ms=UNREGISTER_TIMEOUT_MS
        )

    async def get_broker_cluster_info(self, namesrv: str, limit: int, timeout_ms: int) -> bytes:
        """GET_BROKER_CLUSTER_INFO's body, refused as ``BodyError`` past ``limit`` bytes."""
        return await self._bounded_body(
            namesrv, RequestCode.GET_BROKER_CLUSTER_INFO, limit, NAME_SERVER, timeout_ms
        )

    # -- the master (a slave's requests) ---------------------------------------------------------
    async def get_all_topic_config(self, master: str) -> dict:
        return await self._json_object(master, RequestCode.GET_ALL_TOPIC_CONFIG)

    async def get_all_subscription_group_config(self, master: str) -> dict:
        return await self._json_object(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)

    async def get_all_consumer_offset(self, master: str) -> dict:
        return await self._json_object(master, RequestCode.GET_ALL_CONSUMER_OFFSET)

    async def get_all_delay_offset(self, master: str) -> dict:
        return await self._json_object(master, RequestCode.GET_ALL_DELAY_OFFSET)

    async def update_consumer_offset(self, master: str, header: UpdateConsumerOffsetRequestHeader) -> None:
        await self.call(master, RequestCode.UPDATE_CONSUMER_OFFSET, header, role=MASTER)

    async def get_broker_runtime_info(self, broker: str) -> dict:
        """GET_BROKER_RUNTIME_INFO's ``table`` (brokerRole, haListenPort, …)."""
        table = (await self._json_object(broker, RequestCode.GET_BROKER_RUNTIME_INFO, BROKER)).get(
            "table", {}
        )
        if not isinstance(table, dict):
            raise BodyError(f"{BROKER} {broker} answered a runtime info whose table is no JSON object")
        return table

    async def get_broker_config(self, broker: str, limit: int, timeout_ms: int) -> bytes:
        """GET_BROKER_CONFIG's body (properties text), refused as ``BodyError`` past ``limit`` bytes."""
        return await self._bounded_body(broker, RequestCode.GET_BROKER_CONFIG, limit, BROKER, timeout_ms)
