"""How a server process (broker or controller) connects to the others: signed with its inner
account (innerAccessKey/innerSecretKey; a name server, controller or broker with ACL on takes only
admin accounts) and over TLS as its settings say. Both outer APIs — the broker's
(``broker.server.outer_api``) and the controller's (``broker.controller.outer_api``) — build their
connections here, so signing and TLS of every outbound call are decided in one place."""

from __future__ import annotations

from broker.common.acl_signature import SessionCredentials
from broker.remoting.client import RemotingClient
from broker.remoting.tls import ClientTls

from .plain_config import AclConfigError


def inner_credentials(access_key: str, secret_key: str) -> SessionCredentials | None:
    """The process's own account, when both keys are set."""
    if access_key and secret_key:
        return SessionCredentials(access_key, secret_key)
    if access_key or secret_key:
        raise AclConfigError("innerAccessKey and innerSecretKey must be set together")
    return None


def outbound_client(access_key: str, secret_key: str, tls: ClientTls) -> RemotingClient:
    """A process's connections to the others: signed with its inner account when one is set,
    over TLS when ``tls`` is enabled. Raises ``ConfError`` for unusable TLS or ACL settings."""
    return RemotingClient(inner_credentials(access_key, secret_key), tls=tls)
