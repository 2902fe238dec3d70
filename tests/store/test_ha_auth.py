"""The HA port's sign-in and acknowledgements (broker/store/ha/auth.py, master.py), in-process on
loopback: a captured sign-in replayed on a new connection is refused (each connection signs a new
challenge), a slave of another broker set is refused, and a report beyond what a connection can
hold is not counted as an acknowledgement, open port or not."""

from __future__ import annotations

import asyncio

from broker.common.tls_modes import TlsMode
from broker.remoting.tls import ServerTls, TlsAcceptor
from broker.store.ha.auth import (
    ANSWER,
    CHALLENGE,
    HELLO,
    HELLO_MAGIC,
    OK,
    PROTOCOL_VERSION,
    REFUSED_NOT_MEMBER,
    REFUSED_SIGNATURE,
    REQUIRED,
    SHARED_SECRET_KEY,
    HAAuthPolicy,
    HACredentials,
    sign_in_frame,
)
from broker.store.ha.epochs import EpochFile
from broker.store.ha.master import HAServer
from broker.store.ha.protocol import REPORT
from broker.store.ha.slave import HAClient
from broker.store.results import PutMessageStatus

from .test_ha_wire import _message, _stores, _until

SECRET = "sixteen or more characters"


def _policy(secret: str | None = SECRET) -> HAAuthPolicy:
    def expects(name: str | None, broker_id: int) -> str | None:
        return None if name in (None, "set-a") and broker_id > 0 else "not a slave of set-a"

    secret_of = (lambda key: secret if key == SHARED_SECRET_KEY else None) if secret else None
    return HAAuthPolicy(secret_of, expects, "haAuthSecret" if secret else "nothing")


async def _challenge(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HELLO.pack(HELLO_MAGIC, PROTOCOL_VERSION, 0))
    magic, _, status, nonce = CHALLENGE.unpack(await reader.readexactly(CHALLENGE.size))
    assert magic == HELLO_MAGIC and status == REQUIRED
    return reader, writer, nonce


async def _answer(reader: asyncio.StreamReader) -> int:
    return ANSWER.unpack(await reader.readexactly(ANSWER.size))[2]


async def test_a_captured_sign_in_is_refused_on_a_new_connection(tmp_path):
    master, _ = _stores(tmp_path)
    master.start(dispatch_loop=asyncio.get_running_loop())
    server = HAServer(master, "127.0.0.1", 0, auth=_policy())
    port = await server.start()
    try:
        reader, writer, nonce = await _challenge(port)
        captured = sign_in_frame(HACredentials(SHARED_SECRET_KEY, SECRET, "set-a", 1), nonce)
        writer.write(captured)
        assert await _answer(reader) == OK
        writer.close()

        reader, writer, nonce = await _challenge(port)
        writer.write(captured + REPORT.pack(0))  # replayed, then asks for the log
        assert await _answer(reader) == REFUSED_SIGNATURE
        assert await reader.read() == b""  # closed, not a byte of the log
        writer.close()

        for credentials, refusal in (
            (HACredentials(SHARED_SECRET_KEY, "another sixteen chars", "set-a", 1), REFUSED_SIGNATURE),
            (HACredentials("someone", SECRET, "set-a", 1), REFUSED_SIGNATURE),
            (HACredentials(SHARED_SECRET_KEY, SECRET, "set-b", 1), REFUSED_NOT_MEMBER),
            (HACredentials(SHARED_SECRET_KEY, SECRET, "set-a", 0), REFUSED_NOT_MEMBER),
        ):
            reader, writer, nonce = await _challenge(port)
            writer.write(sign_in_frame(credentials, nonce))
            assert await _answer(reader) == refusal, credentials
            writer.close()
        assert not server.confirmed_offsets()
    finally:
        await server.stop()
        master.shutdown()


async def test_a_report_beyond_what_a_connection_can_hold_is_not_counted(tmp_path):
    """Open port (no sign-in asked): a stranger confirming 2^62 confirms nothing; a slave is
    counted up to what it held on connecting and what it was sent."""
    master, _ = _stores(tmp_path)
    master.start(dispatch_loop=asyncio.get_running_loop())
    server = HAServer(master, "127.0.0.1", 0, auth=_policy(None))
    port = await server.start()
    try:
        for i in range(20):
            assert master.put_message(_message(i)).ok
        end = master.max_physic_offset
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(2**62) * 3)
        await _until(lambda: server.connections and server.connections[0].request_offset > 0)
        await asyncio.sleep(0.1)
        assert server.confirmed_offsets() == {}
        assert server.wait_for_slave(end) is PutMessageStatus.SLAVE_NOT_AVAILABLE
        writer.close()
        await _until(lambda: not server.connections)

        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(end // 2) + REPORT.pack(end) + REPORT.pack(end + 1))
        await _until(lambda: list(server.confirmed_offsets().values()) == [end])  # streamed to it: counted
        await asyncio.sleep(0.1)
        assert list(server.confirmed_offsets().values()) == [end]  # end + 1: never written, not counted
        writer.close()
    finally:
        await server.stop()
        master.shutdown()


async def test_a_slave_signs_in_and_replicates_or_says_why_not(tmp_path):
    master, slave = _stores(tmp_path)
    loop = asyncio.get_running_loop()
    master.start(dispatch_loop=loop)
    slave.start(dispatch_loop=loop)
    server = HAServer(master, "127.0.0.1", 0, auth=_policy())
    port = await server.start()
    wrong = HAClient(
        slave, f"127.0.0.1:{port}", credentials=HACredentials(SHARED_SECRET_KEY, "x" * 16, "set-a", 1)
    )
    right = HAClient(
        slave, f"127.0.0.1:{port}", credentials=HACredentials(SHARED_SECRET_KEY, SECRET, "set-a", 1)
    )
    try:
        for i in range(50):
            assert master.put_message(_message(i)).ok
        wrong.start()
        await _until(lambda: "refused" in wrong.last_error)
        assert "haAuthSecret" in wrong.last_error and slave.max_physic_offset == 0
        await wrong.stop()
        right.start()
        await _until(lambda: slave.max_physic_offset == master.max_physic_offset)
        assert right.signed_in >= 1 and server.connections[0].authenticated
    finally:
        await wrong.stop()
        await right.stop()
        await server.stop()
        slave.shutdown()
        master.shutdown()


async def test_controller_mode_over_tls_enforcing_signs_in_then_handshakes(tmp_path, certs):
    """The HA port with the broker's TLS settings (enforcing): a controller-mode slave signs in
    and handshakes over TLS and follows; a plaintext reader gets nothing."""
    master, slave = _stores(tmp_path)
    loop = asyncio.get_running_loop()
    master.start(dispatch_loop=loop)
    slave.start(dispatch_loop=loop)
    master_epochs, slave_epochs = EpochFile(tmp_path / "m-epochs"), EpochFile(tmp_path / "s-epochs")
    master_epochs.append(1, 0)
    tls = TlsAcceptor(ServerTls(TlsMode.ENFORCING, certs.server_cert, certs.server_key))
    server = HAServer(master, "127.0.0.1", 0, epochs=master_epochs, auth=_policy(), tls=tls)
    port = await server.start()
    client = HAClient(
        slave,
        epochs=slave_epochs,
        broker_id=2,
        credentials=HACredentials(SHARED_SECRET_KEY, SECRET, "set-a", 2),
        ssl_context=certs.client_tls().context(),
    )
    try:
        for i in range(50):
            assert master.put_message(_message(i)).ok
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(0))
        assert await asyncio.wait_for(reader.read(), 20) == b""  # plaintext: closed unanswered
        writer.close()
        client.update_master_address(f"127.0.0.1:{port}")
        client.start()
        await _until(lambda: slave.max_physic_offset == master.max_physic_offset)
        assert client.signed_in == 1 and client.handshakes == 1
        await _until(lambda: server.acked_offsets() == {2: master.max_physic_offset})
    finally:
        await client.stop()
        await server.stop()
        slave.shutdown()
        master.shutdown()
