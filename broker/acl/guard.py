"""The ACL put in front of a server's processors: each registered handler (and the default one)
is wrapped in one that checks the request first and answers a refusal itself.

Installed only when ``aclEnable`` is on, after every processor is registered: with ACL off the
table holds the handlers themselves and a request costs nothing more. ``replay`` carries the
server's replay and TLS settings for signed requests (``replay.py``). A refusal is answered
with NO_PERMISSION (16) and the reason; a refused oneway request is dropped (nobody reads an
answer to it), as any oneway failure is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.common.codes import ResponseCode
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.connection import Handler, ProcessorTable, RemotingConnection

from .acl_file import AclFile
from .replay import NO_REPLAY_PROTECTION, ReplayGuard
from .resources import ADMIN_CODES
from .validator import AclRefusal, check_request, host_of

log = logging.getLogger(__name__)
_HOST = "acl_host"  # a connection attribute: the peer's address, worked out once
_SECURE = "acl_tls"  # a connection attribute: whether it is a TLS connection


def _peer(conn: RemotingConnection) -> tuple[str, bool]:
    """The peer's host, and whether the connection is TLS (a permissive port takes both)."""
    host = conn.attributes.get(_HOST)
    if host is None:
        host = conn.attributes[_HOST] = host_of(conn.remote_addr)
        transport = conn.transport
        secure = transport is not None and transport.get_extra_info("ssl_object") is not None
        conn.attributes[_SECURE] = secure
    return host, conn.attributes[_SECURE]


def peer_host(conn: RemotingConnection) -> str:
    """The peer's address as ACL matches it, worked out once per connection."""
    return _peer(conn)[0]


def _guarded(
    handler: Handler,
    acl: AclFile,
    admin_codes: frozenset[int],
    open_codes: frozenset[int],
    replay: ReplayGuard,
) -> Handler:
    def guarded(conn: RemotingConnection, request: RemotingCommand):
        host, secure = _peer(conn)
        try:
            check_request(
                acl.current,
                request,
                host,
                admin_codes=admin_codes,
                open_codes=open_codes,
                replay=replay,
                secure=secure,
            )
        except AclRefusal as exc:
            log.info("ACL refused request code %d from %s: %s", request.code, conn.remote_addr, exc)
            return response_to(request, ResponseCode.NO_PERMISSION, str(exc))
        return handler(conn, request)

    guarded.__wrapped__ = handler  # type: ignore[attr-defined]
    return guarded


def install_acl(
    processors: ProcessorTable,
    acl: AclFile,
    *,
    admin_codes: frozenset[int] = ADMIN_CODES,
    open_codes: frozenset[int] = frozenset(),
    exempt: Callable[[int], bool] | None = None,
    replay: ReplayGuard = NO_REPLAY_PROTECTION,
) -> None:
    """Wrap every handler of ``processors`` (codes for which ``exempt(code)`` holds are left as
    they are)."""
    for code, handler in list(processors.handlers.items()):
        if exempt is not None and exempt(code):
            continue
        processors.handlers[code] = _guarded(handler, acl, admin_codes, open_codes, replay)
    if processors.default is not None:
        processors.default = _guarded(processors.default, acl, admin_codes, open_codes, replay)
