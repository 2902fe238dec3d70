"""TLS on a remoting port, in process on loopback: the three modes against plaintext and TLS
clients, certificate checks, client certificates, bad settings and silent connections — on the
standard loop and on uvloop (the name server's and broker's)."""

import asyncio
import re
import socket
import ssl

import pytest
import uvloop

from broker.common.codes import ResponseCode
from broker.common.tls_modes import TlsMode
from broker.local_tls import TlsFiles
from broker.remoting import tls as tls_module
from broker.remoting.client import RemotingClient, SyncRemotingClient
from broker.remoting.command import create_request, response_to
from broker.remoting.errors import RemotingConnectError, RemotingError
from broker.remoting.server import RemotingServer
from broker.remoting.tls import ClientTls, ServerTls, TlsConfigError
from tests.listener_failures import wait_until_async

ECHO = 1000


def trusted(certs: TlsFiles, **extra) -> ClientTls:
    return ClientTls(enable=True, trust_cert_path=certs.ca, **extra)


async def echo(conn, request):
    return response_to(request, ResponseCode.SUCCESS, ext_fields={"tls": str(conn.transport.get_extra_info(
        "ssl_object") is not None)}, body=request.body)  # fmt: skip


async def serving(settings: ServerTls | None) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, tls=settings)
    server.register_processor(ECHO, echo)
    await server.start()
    return server


async def ask(client_tls: ClientTls | None, port: int, body: bytes = b"hi"):
    client = RemotingClient(tls=client_tls)
    try:
        return await client.invoke(f"127.0.0.1:{port}", create_request(ECHO, body=body), 5000)
    finally:
        await client.close()


async def _both_kinds_on_one_port(certs: TlsFiles) -> None:
    server = await serving(ServerTls.from_properties(certs.server_conf("permissive")))
    try:
        plain, secure = await asyncio.gather(ask(None, server.port), ask(trusted(certs), server.port))
        assert (plain.code, plain.field("tls"), plain.body) == (ResponseCode.SUCCESS, "False", b"hi")
        assert (secure.code, secure.field("tls"), secure.body) == (ResponseCode.SUCCESS, "True", b"hi")
        # Frames larger than a TLS record (16 KiB) and many in flight at once come back whole.
        client = RemotingClient(tls=trusted(certs))
        addr = f"127.0.0.1:{server.port}"
        bodies = [bytes([i]) * (200_000 + i) for i in range(20)]
        answers = await asyncio.gather(
            *(client.invoke(addr, create_request(ECHO, body=b), 5000) for b in bodies)
        )
        assert [a.body for a in answers] == bodies
        await client.close()
    finally:
        await server.stop()


async def test_permissive_serves_plaintext_and_tls_on_one_port(certs):
    await _both_kinds_on_one_port(certs)


def test_permissive_on_uvloop(certs):
    uvloop.run(_both_kinds_on_one_port(certs))


async def _enforcing(certs: TlsFiles) -> None:
    server = await serving(ServerTls.from_properties(certs.server_conf("enforcing")))
    try:
        refused = await ask(None, server.port)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "accepts TLS connections only" in refused.remark and "tls.enable=true" in refused.remark
        secure = await ask(trusted(certs), server.port)
        assert (secure.code, secure.field("tls")) == (ResponseCode.SUCCESS, "True")
        await wait_until_async(lambda: not server.connections, 5)  # both clients are gone
    finally:
        await server.stop()


async def test_enforcing_refuses_plaintext_with_a_reason(certs):
    await _enforcing(certs)


def test_enforcing_on_uvloop(certs):
    uvloop.run(_enforcing(certs))


async def test_disabled_serves_plaintext_and_a_tls_client_fails_clearly(certs):
    server = await serving(ServerTls.from_properties({"tls.server.mode": "disabled"}))
    assert server.tls is None  # nothing between the socket and the protocol
    try:
        assert (await ask(None, server.port)).code == ResponseCode.SUCCESS
        with pytest.raises(RemotingConnectError, match="closed the connection during the TLS handshake"):
            await ask(trusted(certs), server.port)
    finally:
        await server.stop()


async def test_wrong_trust_store_and_wrong_name_fail_verification(certs):
    server = await serving(ServerTls.from_properties(certs.server_conf("enforcing")))
    other = await serving(ServerTls(TlsMode.ENFORCING, certs.localhost_only_cert, certs.localhost_only_key))
    try:
        with pytest.raises(RemotingConnectError, match="TLS certificate verification failed") as caught:
            await ask(ClientTls(enable=True, trust_cert_path=certs.other_ca), server.port)
        assert "other-ca.pem" in str(caught.value)
        # Signed by the trusted CA, but for "localhost": connecting to 127.0.0.1 must not pass.
        with pytest.raises(RemotingConnectError, match=r"TLS certificate verification failed.*127\.0\.0\.1"):
            await ask(trusted(certs), other.port)
        # Test mode (RocketMQ's tls.test.mode.enable) encrypts without checking.
        loose = await ask(ClientTls(enable=True, test_mode=True, trust_cert_path=certs.other_ca), other.port)
        assert (loose.code, loose.field("tls")) == (ResponseCode.SUCCESS, "True")
    finally:
        await server.stop()
        await other.stop()


async def test_required_client_certificate(certs):
    auth = {"tls.server.need.client.auth": "require", "tls.server.trustCertPath": certs.ca}
    settings = ServerTls.from_properties(certs.server_conf("enforcing", **auth))
    server = await serving(settings)
    try:
        with_cert = trusted(certs, cert_path=certs.client_cert, key_path=certs.client_key)
        assert (await ask(with_cert, server.port)).code == ResponseCode.SUCCESS
        # TLS 1.3 tells the client of the missing certificate only at its first read.
        with pytest.raises(RemotingError):
            await ask(trusted(certs), server.port)
    finally:
        await server.stop()


async def test_silent_and_half_open_connections_are_dropped(certs, monkeypatch):
    monkeypatch.setattr(tls_module, "FIRST_BYTE_TIMEOUT_S", 0.2)
    server = await serving(ServerTls.from_properties(certs.server_conf("permissive")))
    acceptor = server.tls
    assert acceptor is not None
    loop = asyncio.get_running_loop()
    try:
        silent = socket.create_connection(("127.0.0.1", server.port))
        silent.setblocking(False)
        gone = await asyncio.wait_for(loop.sock_recv(silent, 1), 5)
        assert gone == b""  # closed by the server
        silent.close()
        # A peer that goes away before its first byte leaves nothing behind.
        socket.create_connection(("127.0.0.1", server.port)).close()
        await wait_until_async(lambda: not acceptor._undecided, 5)
        assert (await ask(None, server.port)).code == ResponseCode.SUCCESS
    finally:
        await server.stop()


async def test_stop_drops_undecided_connections(certs):
    server = await serving(ServerTls.from_properties(certs.server_conf("enforcing")))
    acceptor = server.tls
    assert acceptor is not None
    waiting = socket.create_connection(("127.0.0.1", server.port))
    await wait_until_async(lambda: len(acceptor._undecided) == 1, 5)
    await server.stop()
    assert not acceptor._undecided
    waiting.settimeout(5)
    assert waiting.recv(1) == b""
    waiting.close()


def test_settings_errors_name_the_key(certs, tmp_path):
    with pytest.raises(TlsConfigError, match=r"tls\.server\.mode='strict' is not valid.*permissive"):
        ServerTls.from_properties({"tls.server.mode": "strict"})
    with pytest.raises(TlsConfigError, match=r"tls\.server\.need\.client\.auth"):
        ServerTls.from_properties({"tls.server.need.client.auth": "always"})
    with pytest.raises(TlsConfigError, match=r"needs tls\.server\.certPath"):
        RemotingServer(tls=ServerTls.from_properties({"tls.server.mode": "permissive"}))
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(TlsConfigError, match=re.escape(f"tls.server.certPath={missing}: cannot load")):
        RemotingServer(tls=ServerTls(TlsMode.ENFORCING, missing, missing))
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath=.*cannot load"):  # key of another cert
        ServerTls(TlsMode.ENFORCING, certs.server_cert, certs.client_key).context()
    with pytest.raises(TlsConfigError, match=re.escape(f"tls.client.trustCertPath={missing}")):
        SyncRemotingClient(tls=ClientTls(enable=True, trust_cert_path=missing))
    with pytest.raises(TlsConfigError, match=r"tls\.enable='yes'"):
        ClientTls.from_properties({"tls.enable": "yes"})
    assert ServerTls.from_properties({}).mode is TlsMode.DISABLED  # the default


def test_client_settings_from_the_environment(certs):
    assert ClientTls.from_env({}) == ClientTls()  # plaintext unless asked
    tls = ClientTls.from_env({"ROCKETMQ_TLS_ENABLE": "true", "ROCKETMQ_TLS_TRUST_CERT": certs.ca,
                              "ROCKETMQ_TLS_CLIENT_KEY_PASSWORD": "s3cret"})  # fmt: skip
    assert (tls.enable, tls.test_mode, tls.trust_cert_path) == (True, False, certs.ca)
    assert "s3cret" not in repr(tls)  # passwords stay out of logs
    with pytest.raises(TlsConfigError, match="ROCKETMQ_TLS_ENABLE='1' is not valid: must be true or false"):
        ClientTls.from_env({"ROCKETMQ_TLS_ENABLE": "1"})
    context = tls.context()
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


async def test_silent_connections_beyond_the_bound_are_closed_at_once(certs):
    server = await serving(ServerTls.from_properties(certs.server_conf("permissive")))
    acceptor = server.tls
    assert acceptor is not None
    acceptor.max_undecided = 2
    loop = asyncio.get_running_loop()
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
    try:
        await wait_until_async(lambda: len(acceptor._undecided) == 2, 5)
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.setblocking(False)
        assert await asyncio.wait_for(loop.sock_recv(extra, 1), 5) == b""  # closed at once
        extra.close()
        assert acceptor.dropped == 1 and len(acceptor._undecided) == 2
    finally:
        for sock in silent:
            sock.close()
        await server.stop()
