"""The body of SEND_BATCH_MESSAGE: messages packed back to back, as RocketMQ's MessageBatch.

Per message: totalSize 4 | magicCode 4 | bodyCRC 4 | flag 4 | bodyLength 4 + body
| propertiesLength 2 + properties.
"""

from __future__ import annotations

import struct
import zlib

from .message import Message
from .message_codec import properties_to_string, string_to_properties

HEAD = struct.Struct(">iiiii")
SHORT = struct.Struct(">h")
# Most messages one batch may carry (not a RocketMQ limit: its bound is maxMessageSize on the
# whole body). Decoding and storing a message costs the event loop ~5-10 us, so 1,024 hold it
# ~10 ms; 170k one-byte messages held it over a second. The SDK splits longer lists.
MAX_BATCH_MESSAGES = 1024


class BatchDecodeError(ValueError):
    """A batch body that cannot be split into messages."""


def encode_batch(messages: list[Message]) -> bytes:
    parts = []
    for msg in messages:
        body = bytes(msg.body)
        props = properties_to_string(msg.properties).encode()
        total = HEAD.size + len(body) + SHORT.size + len(props)
        parts.append(HEAD.pack(total, 0, zlib.crc32(body) & 0x7FFFFFFF, msg.flag, len(body)))
        parts += [body, SHORT.pack(len(props)), props]
    return b"".join(parts)


def decode_batch(raw: bytes, topic: str, max_messages: int = MAX_BATCH_MESSAGES) -> list[Message]:
    """The messages of a batch body; BatchDecodeError (and nothing else) when it is malformed
    or holds more than ``max_messages`` (found before the extra messages are decoded)."""
    messages: list[Message] = []
    pos = 0
    try:
        while pos < len(raw):
            if len(messages) >= max_messages:
                raise BatchDecodeError(f"the batch holds more than {max_messages} messages")
            total, _magic, _crc, flag, body_len = HEAD.unpack_from(raw, pos)
            if total < HEAD.size + 2 or pos + total > len(raw) or body_len < 0 or body_len > total:
                raise BatchDecodeError(f"message at {pos} declares {total} bytes")
            body = raw[pos + HEAD.size : pos + HEAD.size + body_len]
            cur = pos + HEAD.size + body_len
            props_len = SHORT.unpack_from(raw, cur)[0]
            if props_len < 0 or cur + 2 + props_len != pos + total:
                raise BatchDecodeError(f"message at {pos} has inconsistent lengths")
            props = string_to_properties(bytes(raw[cur + 2 : cur + 2 + props_len]).decode())
            messages.append(Message(topic, body, flag, props))
            pos += total
    except (struct.error, UnicodeDecodeError) as exc:
        raise BatchDecodeError(f"malformed batch: {exc}") from None
    return messages
