"""Every request the controller sends to brokers (RocketMQ's notifyBrokerRoleChanged): signed with
the controller's innerAccessKey/innerSecretKey and over TLS as its controller.conf (or namesrv.conf,
with the controller embedded) says, through the same connection builder as the broker's outer API
(:mod:`broker.acl.outbound`), so a broker with ACL on takes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.acl.outbound import outbound_client
from broker.common.codes import RequestCode
from broker.common.request_headers.controller import NotifyBrokerRoleChangedRequestHeader
from broker.remoting.command import create_request

if TYPE_CHECKING:
    from .config import ControllerConfig


class ControllerOuterAPI:
    """What a controller sends to brokers, signed with its innerAccessKey/innerSecretKey and over
    TLS as its tls.enable/tls.client.* say."""

    def __init__(self, config: ControllerConfig) -> None:
        """Raises ``ConfError`` for unusable TLS or ACL settings (the controller's start reports them)."""
        self.remoting = outbound_client(config.inner_access_key, config.inner_secret_key, config.client_tls)

    async def close(self) -> None:
        await self.remoting.close()

    async def notify_broker_role_changed(
        self, broker: str, header: NotifyBrokerRoleChangedRequestHeader, body: bytes
    ) -> None:
        """One-way (RocketMQ's notifyBrokerRoleChanged): nothing answers; a broker that is down
        raises ``RemotingError`` when the connection cannot be made."""
        request = create_request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header, body, oneway=True)
        await self.remoting.invoke_oneway(broker, request)
