"""A scripted remoting server for admin-client tests: real TCP frames, canned answers.

Each test installs handlers per request code; every request received is recorded so a test can
assert which codes and header fields the admin client sent to which server.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.common.message import MessageExt
from broker.common.message_codec import encode_message
from broker.common.request_headers import GetBrokerConfigResponseHeader, PullMessageResponseHeader

Answer = tuple[int, dict[str, object], bytes | None, str | None]
Handler = Callable[[dict[str, str], bytes | None], Answer]


@dataclass
class Received:
    code: int
    ext_fields: dict[str, str]
    body: bytes | None


@dataclass
class FakeServer:
    handlers: dict[int, Handler] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.addr = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def on(self, code: int, handler: Handler) -> None:
        self.handlers[code] = handler

    def codes(self) -> list[int]:
        return [r.code for r in self.received]

    def close(self) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    header, body = _read_frame(conn)
                except (ConnectionError, OSError, struct.error):
                    return
                ext = header.get("extFields") or {}
                self.received.append(Received(header["code"], ext, body))
                handler = self.handlers.get(header["code"])
                if handler is None:
                    answer: Answer = (3, {}, None, f"request code {header['code']} not supported")
                else:
                    answer = handler(ext, body)
                conn.sendall(_frame(header["opaque"], *answer))


def _read_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(conn: socket.socket) -> tuple[dict, bytes | None]:
    (length,) = struct.unpack(">i", _read_exact(conn, 4))
    data = _read_exact(conn, length)
    header_length = struct.unpack(">i", data[:4])[0] & 0xFFFFFF
    return json.loads(data[4 : 4 + header_length]), data[4 + header_length :] or None


def _frame(opaque: int, code: int, ext: dict[str, object], body: bytes | None, remark: str | None) -> bytes:
    header = {
        "code": code,
        "flag": 1,
        "opaque": opaque,
        "language": "JAVA",
        "version": 401,
        "remark": remark,
        "extFields": {k: str(v) for k, v in ext.items()},
    }
    raw = json.dumps(header).encode()
    payload = body or b""
    return struct.pack(">ii", 4 + len(raw) + len(payload), len(raw)) + raw + payload


def ok(body: bytes | str | None = None, **ext: object) -> Answer:
    if isinstance(body, str):
        body = body.encode()
    return 0, ext, body, None


def error(code: int, remark: str) -> Answer:
    return code, {}, None, remark


def pulled(
    body: bytes | None, next_begin_offset: int, min_offset: int, max_offset: int, code: int = 0
) -> Answer:
    """A PULL_MESSAGE answer with every field RocketMQ's brokers send (suggestWhichBrokerId too:
    0, read from the master again)."""
    header = PullMessageResponseHeader(next_begin_offset, min_offset, max_offset, suggest_which_broker_id=0)
    return code, dict(header.to_ext_fields()), body, None


def broker_config(properties: dict[str, str], pending_restart: str | None = None) -> Answer:
    """A GET_BROKER_CONFIG answer: the properties, and the topic table's DataVersion in ``version``
    as every broker sends it."""
    version = '{"counter":1,"timestamp":1700000000000}'
    header = GetBrokerConfigResponseHeader(version, pending_restart)
    text = "".join(f"{k}={v}\n" for k, v in properties.items())
    return 0, dict(header.to_ext_fields()), text.encode(), None


def encode_stored_message(
    *,
    topic: str,
    queue_id: int,
    queue_offset: int,
    physical_offset: int,
    body: bytes,
    properties: dict[str, str],
    store_host: tuple[str, int],
    born_ts: int = 1_700_000_000_000,
    store_ts: int = 1_700_000_000_500,
) -> bytes:
    """A stored message as brokers put it in VIEW/QUERY/PULL bodies (the shared codec's layout)."""
    message = MessageExt(
        topic=topic,
        body=body,
        properties=dict(properties),
        queue_id=queue_id,
        queue_offset=queue_offset,
        commitlog_offset=physical_offset,
        born_timestamp=born_ts,
        born_host=("10.0.0.9", 50000),
        store_timestamp=store_ts,
        store_host=store_host,
    )
    return bytes(encode_message(message))
