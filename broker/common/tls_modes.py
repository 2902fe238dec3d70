"""The names of RocketMQ's TLS settings on a remoting port: ``tls.server.mode`` and
``tls.server.need.client.auth``. Vocabulary shared by the remoting layer, which serves the modes
(``broker/remoting/tls.py``), and the ``broker.conf`` key table, which checks the names.

- ``disabled``: plaintext only, the port is served exactly as without TLS;
- ``permissive``: plaintext and TLS on the same port;
- ``enforcing``: TLS only.
"""

from __future__ import annotations

import enum


class TlsMode(enum.StrEnum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.StrEnum):
    """``tls.server.need.client.auth``: whether a server asks clients for a certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


TLS_MODES = tuple(mode.value for mode in TlsMode)
CLIENT_AUTH_MODES = tuple(auth.value for auth in ClientAuth)
DEFAULT_TLS_MODE = TlsMode.DISABLED  # RocketMQ's is permissive: see broker/remoting/tls.py's ServerTls
