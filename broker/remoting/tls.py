"""TLS on the remoting ports, with RocketMQ's settings and modes.

Servers (name server, broker) read ``tls.server.*`` from their conf file; ``tls.server.mode`` is
RocketMQ's ``disabled`` (plaintext only: the port is served exactly as without TLS), ``permissive``
(plaintext and TLS on the same port) or ``enforcing`` (TLS only), names kept with the broker.conf
key table's vocabulary in broker/common/tls_modes.py. In the last two a new connection is told
apart by its first byte, as RocketMQ's TlsModeHandler does: 0x16 opens a TLS handshake record;
anything else is a remoting frame (whose 4-byte length could only start with 0x16 for a frame of
352 MiB or more, far over any frame limit). The byte is peeked, not read, so the TLS layer sees
the whole handshake.

Clients read ``tls.enable`` and ``tls.client.*`` (the SDK, ``mqadmin`` and the console from the
environment, the broker from ``broker.conf``). Unlike RocketMQ, whose ``tls.test.mode.enable``
is true by default and whose clients trust any server certificate unless
``tls.client.authServer`` is set, a client here verifies the server's certificate chain and its
name (the host or IP address it connects to) unless ``tls.test.mode.enable=true``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker.common.codes import ResponseCode
from broker.common.conf_file import ConfError
from broker.common.tls_modes import CLIENT_AUTH_MODES, DEFAULT_TLS_MODE, TLS_MODES, ClientAuth, TlsMode

from .command import RemotingCommand, response_to
from .errors import FrameError
from .frame import FrameDecoder, encode_frame

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16  # the first byte of every TLS ClientHello (a handshake record)
# A client that connects and sends nothing, or never finishes its handshake, holds a socket and
# little else; it is dropped after this long (real clients write as soon as they connect).
FIRST_BYTE_TIMEOUT_S = 10.0
HANDSHAKE_TIMEOUT_S = 10.0
# Enforcing mode answers a plaintext client's first request (saying TLS is required) when the
# request fits in this many bytes, then closes; a larger one is closed unanswered.
REFUSED_FRAME_MAX = 64 * 1024
# Connections whose first byte has not come yet are not the server's connections (its cap counts
# those): a flood of silent ones is bounded here, beyond it new ones are closed at once.
DEFAULT_MAX_UNDECIDED = 10_000
DROP_LOG_INTERVAL_S = 10.0


# The client settings' environment variables (RocketMQ's clients read Java system properties;
# a shell cannot export names with dots): tls.enable, tls.test.mode.enable, tls.client.*.
ENV_ENABLE = "ROCKETMQ_TLS_ENABLE"
ENV_TEST_MODE = "ROCKETMQ_TLS_TEST_MODE_ENABLE"
ENV_TRUST_CERT = "ROCKETMQ_TLS_TRUST_CERT"
ENV_CLIENT_CERT = "ROCKETMQ_TLS_CLIENT_CERT"
ENV_CLIENT_KEY = "ROCKETMQ_TLS_CLIENT_KEY"
ENV_CLIENT_KEY_PASSWORD = "ROCKETMQ_TLS_CLIENT_KEY_PASSWORD"


class TlsConfigError(ConfError):
    """TLS settings that cannot be used (a missing or unreadable certificate, an unknown mode);
    the message names the key."""


def _parse_choice(conf: Mapping[str, str], key: str, choices: tuple[str, ...], default: str) -> str:
    value = (conf.get(key) or default).strip().lower()
    if value not in choices:
        raise TlsConfigError(f"{key}={conf.get(key)!r} is not valid: must be one of {', '.join(choices)}")
    return value


def _parse_bool(conf: Mapping[str, str], key: str, default: bool) -> bool:
    raw = (conf.get(key) or "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise TlsConfigError(f"{key}={conf.get(key)!r} is not valid: must be true or false")
    return raw == "true"


def _new_context(protocol: int) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _load_chain(context: ssl.SSLContext, cert_key: str, cert: str, key: str, password: str) -> None:
    try:
        context.load_cert_chain(cert, key or None, password or None)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TlsConfigError(
            f"{cert_key}={cert}: cannot load the certificate and its key: {reason}"
        ) from None


def _load_trust(context: ssl.SSLContext, trust_key: str, path: str) -> None:
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TlsConfigError(f"{trust_key}={path}: cannot load the trusted certificates: {reason}") from None


@dataclass(frozen=True)
class ServerTls:
    """A server's ``tls.server.*`` settings.

    The default mode is ``disabled``, where RocketMQ's is ``permissive``: RocketMQ's permissive
    server without a certificate makes itself a self-signed one (``tls.test.mode.enable``), so any
    client may encrypt but none can tell the server from an impostor. Here TLS is on only when an
    operator gives a certificate, and a port without it costs nothing extra per connection."""

    mode: TlsMode = DEFAULT_TLS_MODE
    cert_path: str = ""
    key_path: str = ""
    key_password: str = field(default="", repr=False)
    need_client_auth: ClientAuth = ClientAuth.NONE
    trust_cert_path: str = ""

    @classmethod
    def from_properties(cls, conf: Mapping[str, str]) -> ServerTls:
        """From a conf file's ``tls.server.*`` keys (the name server's and the broker's use
        the same); a bad value raises ``TlsConfigError`` naming the key."""
        return cls(
            mode=TlsMode(_parse_choice(conf, "tls.server.mode", TLS_MODES, DEFAULT_TLS_MODE)),
            cert_path=(conf.get("tls.server.certPath") or "").strip(),
            key_path=(conf.get("tls.server.keyPath") or "").strip(),
            key_password=conf.get("tls.server.keyPassword") or "",
            need_client_auth=ClientAuth(
                _parse_choice(conf, "tls.server.need.client.auth", CLIENT_AUTH_MODES, ClientAuth.NONE)
            ),
            trust_cert_path=(conf.get("tls.server.trustCertPath") or "").strip(),
        )

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    def context(self) -> ssl.SSLContext:
        """The server's SSLContext; ``TlsConfigError`` naming the key whose file cannot be used."""
        if not self.cert_path:
            raise TlsConfigError(f"tls.server.mode={self.mode} needs tls.server.certPath (and keyPath)")
        context = _new_context(ssl.PROTOCOL_TLS_SERVER)
        _load_chain(context, "tls.server.certPath", self.cert_path, self.key_path, self.key_password)
        if self.need_client_auth is not ClientAuth.NONE:
            context.verify_mode = (
                ssl.CERT_REQUIRED if self.need_client_auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
            )
            if self.trust_cert_path:
                _load_trust(context, "tls.server.trustCertPath", self.trust_cert_path)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return context


@dataclass(frozen=True)
class ClientTls:
    """A client's TLS settings (``tls.enable``, ``tls.test.mode.enable``, ``tls.client.*``).

    ``enable`` false: plaintext. Otherwise the server's certificate must chain to
    ``trust_cert_path`` (the system's trusted CAs when empty) and name the host or IP address
    connected to, unless ``test_mode`` (RocketMQ's ``tls.test.mode.enable``: encrypt, trust
    anything). ``cert_path``/``key_path``: the client's own certificate, for servers that ask
    for one (``tls.server.need.client.auth``)."""

    enable: bool = False
    test_mode: bool = False
    trust_cert_path: str = ""
    cert_path: str = ""
    key_path: str = ""
    key_password: str = field(default="", repr=False)

    @classmethod
    def from_properties(cls, conf: Mapping[str, str], default_enable: bool = False) -> ClientTls:
        return cls(
            enable=_parse_bool(conf, "tls.enable", default_enable),
            test_mode=_parse_bool(conf, "tls.test.mode.enable", False),
            trust_cert_path=(conf.get("tls.client.trustCertPath") or "").strip(),
            cert_path=(conf.get("tls.client.certPath") or "").strip(),
            key_path=(conf.get("tls.client.keyPath") or "").strip(),
            key_password=conf.get("tls.client.keyPassword") or "",
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClientTls:
        """From ``ROCKETMQ_TLS_*`` (the SDK's and ``mqadmin``'s default, as RocketMQ's clients
        read the ``tls.*`` system properties); a bad value's error names the variable."""
        env = os.environ if environ is None else environ
        return cls(
            enable=_parse_bool(env, ENV_ENABLE, False),
            test_mode=_parse_bool(env, ENV_TEST_MODE, False),
            trust_cert_path=env.get(ENV_TRUST_CERT, "").strip(),
            cert_path=env.get(ENV_CLIENT_CERT, "").strip(),
            key_path=env.get(ENV_CLIENT_KEY, "").strip(),
            key_password=env.get(ENV_CLIENT_KEY_PASSWORD, ""),
        )

    def context(self) -> ssl.SSLContext | None:
        """None for plaintext; ``TlsConfigError`` naming the key whose file cannot be used."""
        if not self.enable:
            return None
        context = _new_context(ssl.PROTOCOL_TLS_CLIENT)
        if self.test_mode:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.trust_cert_path:
            _load_trust(context, "tls.client.trustCertPath", self.trust_cert_path)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.cert_path:
            _load_chain(context, "tls.client.certPath", self.cert_path, self.key_path, self.key_password)
        return context


PLAINTEXT = ClientTls()


def describe_connect_failure(exc: BaseException, tls: ClientTls) -> str:
    """An operator's reading of a failed (TLS) connect: which side of TLS went wrong."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = tls.trust_cert_path or "the system's trusted certificates"
        return (
            f"TLS certificate verification failed: {exc.verify_message or exc.reason} "
            f"(the server's certificate checked against {trusted})"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, (ConnectionError, EOFError)):
        return (
            "the server closed the connection during the TLS handshake: "
            "does it accept TLS (tls.server.mode permissive or enforcing)?"
        )
    return str(exc) or type(exc).__name__


# -- the server side: one listening port, three modes ----------------------------------------------
ProtocolFactory = Callable[[], asyncio.Protocol]
# A server's protocol for a connection whose place for its peer's address was taken at accept:
# the protocol gives the place back when the connection ends (see RemotingServer).
AdmittedFactory = Callable[[str | None], asyncio.Protocol]


class AddressGate(Protocol):
    """A server's per-address count (guards.ConnectionCap): a place is taken at accept, before
    the first byte or the handshake, so connections stalled in either count for their address."""

    def admit(self, host: str | None, open_connections: int) -> bool: ...

    def release(self, host: str | None) -> None: ...


class _Ungated:
    """For a port that counts its connections itself (the HA port's pending pool): every
    connection is let through to the handshake."""

    def admit(self, host: str | None, open_connections: int) -> bool:
        return True

    def release(self, host: str | None) -> None:
        pass


UNGATED: AddressGate = _Ungated()


class TlsAcceptor:
    """A server port's TLS: wraps the server's protocol factory so each new connection's first
    byte picks plaintext or TLS (permissive) or refuses plaintext (enforcing). Not used at all
    in ``disabled`` mode: the server then hands its own factory to ``create_server``."""

    def __init__(self, settings: ServerTls, max_undecided: int = DEFAULT_MAX_UNDECIDED) -> None:
        if not settings.enabled:
            raise ValueError("a TlsAcceptor is for permissive or enforcing mode")
        self.mode = settings.mode
        self.context = settings.context()
        self.max_undecided = max_undecided
        self.dropped = 0  # connections closed because too many were undecided
        self._dropped_at: float | None = None  # when that was last logged
        self._undecided: set[_FirstByte] = set()  # connections whose first byte has not come
        self._starting: set[asyncio.Task] = set()  # transports being made (TLS: the handshake)

    def wrap(self, factory: AdmittedFactory, gate: AddressGate) -> ProtocolFactory:
        return lambda: _FirstByte(self, factory, gate)

    def close(self) -> None:
        """Drop the connections still undecided or in their handshake (the server stops)."""
        for undecided in list(self._undecided):
            undecided.drop()
        for task in list(self._starting):
            task.cancel()

    def _room_for_one_more(self) -> bool:
        if len(self._undecided) < self.max_undecided:
            return True
        self.dropped += 1
        now = asyncio.get_running_loop().time()
        if self._dropped_at is None or now - self._dropped_at >= DROP_LOG_INTERVAL_S:
            log.warning(
                "closing new connections: %d have sent nothing yet (%d closed so far)",
                len(self._undecided),
                self.dropped,
            )
            self._dropped_at = now
        return False

    def _serve(self, sock: socket.socket, protocol: asyncio.Protocol, secure: bool, peer: str) -> None:
        task = asyncio.get_running_loop().create_task(self._connect(sock, protocol, secure, peer))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _connect(
        self, sock: socket.socket, protocol: asyncio.Protocol, secure: bool, peer: str
    ) -> None:
        """A transport over ``sock`` (TLS when ``secure``) for ``protocol``, whose
        ``connection_made`` comes with it, before any data (which ``start_tls`` would not
        promise for data that follows the client's handshake at once)."""
        loop = asyncio.get_running_loop()
        try:
            if secure:
                await loop.connect_accepted_socket(
                    lambda: protocol, sock, ssl=self.context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
                )
            else:
                await loop.connect_accepted_socket(lambda: protocol, sock)
        except (OSError, ssl.SSLError, TimeoutError, asyncio.CancelledError) as exc:
            sock.close()
            if not isinstance(exc, asyncio.CancelledError):
                log.warning("%s with %s failed: %s", "TLS handshake" if secure else "connection", peer, exc)
            # It never had ``connection_made``: a server's connection table still lets go of it.
            protocol.connection_lost(exc if isinstance(exc, Exception) else None)


class _FirstByte(asyncio.Protocol):
    """A new connection until its first byte arrives. The socket is taken from the server's
    plaintext transport before it reads anything (a duplicate descriptor keeps the connection;
    the transport is dropped without a word on the wire), its first byte is peeked, and a new
    transport — plaintext or TLS — is made over it for the server's protocol (or a refusal).

    (Pausing the plaintext transport instead would not do: uvloop starts reading right after
    ``connection_made``, paused or not, and bytes it read could not be handed to TLS.)"""

    def __init__(self, acceptor: TlsAcceptor, factory: AdmittedFactory, gate: AddressGate) -> None:
        self.acceptor, self.factory, self.gate = acceptor, factory, gate
        self.peer = "?"
        self.host: str | None = None  # the peer's address, whose place this connection holds
        self._sock: socket.socket | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        if not self.acceptor._room_for_one_more():
            transport.abort()
            return
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if not self.gate.admit(peer[0] if peer else None, len(self.acceptor._undecided)):
            transport.abort()
            return
        self.host = peer[0] if peer else None
        loop = asyncio.get_running_loop()
        try:
            self._sock = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        except OSError as exc:
            log.warning("cannot take over the connection from %s: %s", self.peer, exc)
            transport.abort()
            self.gate.release(self.host)
            return
        transport.abort()  # from connection_made: it never starts reading
        self._sock.setblocking(False)
        loop.add_reader(self._sock.fileno(), self._readable)
        self._timer = loop.call_later(FIRST_BYTE_TIMEOUT_S, self._silent)
        self.acceptor._undecided.add(self)

    def _readable(self) -> None:
        assert self._sock is not None
        try:
            first = self._sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            first = b""
        if not first:  # closed (or reset) before a byte
            self.drop()
            return
        sock = self._settle()
        # The address's place goes with the socket: the protocol gives it back when it ends.
        if first[0] == TLS_HANDSHAKE_RECORD:
            self.acceptor._serve(sock, self.factory(self.host), True, self.peer)
        elif self.acceptor.mode is TlsMode.ENFORCING:
            refusal = _PlaintextRefusal(self.peer, lambda: self.gate.release(self.host))
            self.acceptor._serve(sock, refusal, False, self.peer)
        else:
            self.acceptor._serve(sock, self.factory(self.host), False, self.peer)

    def _settle(self) -> socket.socket:
        """Stop watching; the socket goes on to its transport (or is closed by ``drop``)."""
        self.acceptor._undecided.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        sock, self._sock = self._sock, None
        assert sock is not None
        asyncio.get_running_loop().remove_reader(sock.fileno())
        return sock

    def _silent(self) -> None:
        log.info("closing the connection from %s: nothing sent in %.0f s", self.peer, FIRST_BYTE_TIMEOUT_S)
        self.drop()

    def drop(self) -> None:
        if self._sock is not None:
            self._settle().close()
            self.gate.release(self.host)


class _PlaintextRefusal(asyncio.Protocol):
    """Enforcing mode, a plaintext client: its first request is answered with SYSTEM_ERROR saying
    TLS is required (a RocketMQ server just closes, leaving the client to guess), then closed."""

    def __init__(self, peer: str, on_lost: Callable[[], None]) -> None:
        self.peer, self.on_lost = peer, on_lost
        self.decoder = FrameDecoder(REFUSED_FRAME_MAX)
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._timer = asyncio.get_running_loop().call_later(FIRST_BYTE_TIMEOUT_S, transport.abort)
        log.warning("refusing a plaintext connection from %s: tls.server.mode is enforcing", self.peer)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            commands = self.decoder.feed(data)
        except FrameError:
            self.transport.abort()
            return
        if not commands:
            return
        request = commands[0]
        if not request.is_response and not request.is_oneway:
            self.transport.write(encode_frame(refusal_response(request)))
        self.transport.close()

    def connection_lost(self, exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.on_lost()


def refusal_response(request: RemotingCommand) -> RemotingCommand:
    return response_to(
        request,
        ResponseCode.SYSTEM_ERROR,
        "this server accepts TLS connections only (tls.server.mode=enforcing): "
        "connect with TLS (tls.enable=true)",
    )
