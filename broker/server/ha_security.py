"""Who may replicate from this broker, and how a slave proves it is one (issue 31 §2).

The HA port's sign-in itself is the store's (``broker/store/ha/auth.py``); the broker decides
the secrets and the members from its settings:

- with ACL on (``aclEnable``), a slave signs in with its inner account (``innerAccessKey`` /
  ``innerSecretKey``, the account it registers with the name servers), which must be an **admin**
  account of the master's ``plain_acl.yml`` — replicating reads every message, as an admin can;
- ``haAuthSecret``, the same on the master and its slaves, with or without ACL;
- neither: the port is open, as RocketMQ's is, and a master says so in a WARNING at start.

A slave signs in whenever it has a secret (``haAuthSecret`` first, else its inner account); a
master that asks for nothing answers that it is open, and the slave goes on.

The member a master expects: a slave of its own brokerName, with a slave's brokerId (above 0,
and in controller mode not this broker's own controller id). The port takes the broker's
``tls.server.*`` settings (plaintext, permissive or enforcing, as the remoting port); a slave
connects with TLS when the broker's client settings say so (``tls.enable``) or its own port is
TLS-only.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.common.tls_modes import TlsMode
from broker.remoting.tls import TlsAcceptor
from broker.store.ha.auth import SHARED_SECRET_KEY, HAAuthPolicy, HACredentials
from broker.store.ha.roles import MASTER_ID

if TYPE_CHECKING:
    from broker.acl import AclFile

    from .config import BrokerConfig

log = logging.getLogger(__name__)

OPEN_PORT_WARNING = (
    "the HA port %s accepts any slave (no aclEnable, no haAuthSecret): whoever reaches it can read "
    "the whole commit log and confirm SYNC_MASTER sends; set haAuthSecret (or aclEnable with "
    "innerAccessKey/innerSecretKey) on this broker and its slaves, or firewall the port"
)


def master_policy(
    config: BrokerConfig, acl: AclFile | None, own_controller_id: Callable[[], int | None]
) -> HAAuthPolicy:
    """A master's rules for its HA port. ``own_controller_id``: this broker's controller id
    (controller mode), which no slave may claim."""
    shared = config.ha_auth_secret

    def secret_of(access_key: str) -> str | None:
        if shared and access_key == SHARED_SECRET_KEY:
            return shared
        account = acl.current.accounts.get(access_key) if acl is not None else None
        return account.secret_key if account is not None and account.admin else None

    def expects(broker_name: str | None, broker_id: int) -> str | None:
        if broker_name is not None and broker_name != config.broker_name:
            return f"brokerName {broker_name!r} is not this master's ({config.broker_name!r})"
        if broker_id <= MASTER_ID:
            return f"brokerId {broker_id} is no slave's (a slave's is above {MASTER_ID})"
        if broker_id == own_controller_id():
            return f"brokerId {broker_id} is this master's own"
        return None

    signs = [
        *(["an admin account of plain_acl.yml"] if acl is not None else []),
        *(["haAuthSecret"] if shared else []),
    ]
    return HAAuthPolicy(secret_of if signs else None, expects, " or ".join(signs) or "nothing")


def slave_credentials(config: BrokerConfig, broker_id: int) -> HACredentials | None:
    """What this broker signs in with as a slave: ``haAuthSecret``, else its inner account."""
    if config.ha_auth_secret:
        return HACredentials(SHARED_SECRET_KEY, config.ha_auth_secret, config.broker_name, broker_id)
    if config.inner_access_key and config.inner_secret_key:
        return HACredentials(config.inner_access_key, config.inner_secret_key, config.broker_name, broker_id)
    return None


def server_tls(config: BrokerConfig) -> TlsAcceptor | None:
    """The HA port's TLS: the broker's ``tls.server.*`` (None: plaintext only)."""
    settings = config.server_tls()
    return TlsAcceptor(settings) if settings.enabled else None


def client_ssl(config: BrokerConfig) -> ssl.SSLContext | None:
    """A slave's TLS to its master's HA port: the broker's client settings (``tls.client.*``),
    and TLS also when its own port is TLS-only even if ``tls.enable=false`` keeps its name-server
    connections plaintext: the brokers of a set share their TLS mode, so its master's HA port is
    TLS-only too."""
    tls = config.client_tls()
    if not tls.enable and config.server_tls().mode is TlsMode.ENFORCING:
        tls = dataclasses.replace(tls, enable=True)
    return tls.context()


def warn_if_open(policy: HAAuthPolicy, address: str) -> None:
    if not policy.required:
        log.warning(OPEN_PORT_WARNING, address)
