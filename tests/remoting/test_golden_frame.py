"""Golden bytes of a remoting frame with a JSON header and with RocketMQ's binary header, written
field by field here from RocketMQ's layout (RemotingCommand.encode/markProtocolType and
RocketMQSerializable) rather than through the codec's ``struct`` formats, so an encoder and decoder
that agree on a wrong order or size fail here although they round-trip."""

from __future__ import annotations

import struct

from broker.remoting.command import SERIALIZE_JSON, SERIALIZE_ROCKETMQ, RemotingCommand
from broker.remoting.frame import FrameDecoder, encode_frame

SEND_MESSAGE, PYTHON, JAVA = 10, 3, 0  # RequestCode.SEND_MESSAGE; LanguageCode PYTHON / JAVA
VERSION, OPAQUE, FLAG = 399, 0x01020304, 0  # 4.9.x version; flag 0 = a request, not one-way
REMARK = "café"  # two bytes for é: lengths count UTF-8 bytes, not characters
EXT = {"topic": "GoldenTopic", "queueId": "3"}
BODY = b"hello body"


def be(fmt: str, value) -> bytes:
    """One big-endian field (Java's ByteBuffer order)."""
    return struct.pack(">" + fmt, value)


def golden_frame(serialize_type: int, header: bytes, body: bytes) -> bytes:
    return b"".join([
        be("i", 4 + len(header) + len(body)),  # frame length: itself excluded, header length included
        be("B", serialize_type),               # markProtocolType: high byte = serialisation type
        be("i", len(header))[1:],              # ... low 3 bytes = header length
        header,
        body,
    ])  # fmt: skip


def command(serialize_type: int, language: int = PYTHON) -> RemotingCommand:
    return RemotingCommand(
        SEND_MESSAGE, language, VERSION, OPAQUE, FLAG, REMARK, dict(EXT), BODY, serialize_type
    )


def binary_header(language: int) -> bytes:
    remark = REMARK.encode()
    fields = b"".join(
        be("h", len(key.encode())) + key.encode() + be("i", len(value.encode())) + value.encode()
        for key, value in EXT.items()
    )  # each entry: key length short + key, value length int + value
    return b"".join([
        be("h", SEND_MESSAGE),           # code (short)
        be("b", language),               # LanguageCode (byte)
        be("h", VERSION),                # version (short)
        be("i", OPAQUE),                 # opaque (int)
        be("i", FLAG),                   # flag (int)
        be("i", len(remark)), remark,    # remark: length int + UTF-8 bytes
        be("i", len(fields)), fields,    # extFields: length int + entries
    ])  # fmt: skip


def test_a_frame_with_rocketmqs_binary_header():
    golden = golden_frame(1, binary_header(PYTHON), BODY)
    # Header: 13 fixed + (4 + 5) remark + (4 + 22 + 14) fields = 62 bytes; frame length 4 + 62 + 10.
    assert golden[:8] == bytes.fromhex("0000004C" + "01" + "00003E")
    assert encode_frame(command(SERIALIZE_ROCKETMQ)) == golden
    assert FrameDecoder().feed(golden) == [command(SERIALIZE_ROCKETMQ)]


def test_a_binary_header_without_remark_or_fields_writes_zero_lengths():
    golden = golden_frame(1, be("h", 11) + be("b", JAVA) + be("h", VERSION) + be("i", 9) + be("i", 1)
                          + be("i", 0) + be("i", 0), b"")  # fmt: skip
    bare = RemotingCommand(11, JAVA, VERSION, 9, 1, None, {}, b"", SERIALIZE_ROCKETMQ)
    assert encode_frame(bare) == golden
    assert FrameDecoder().feed(golden) == [bare]


def test_a_frame_with_a_json_header_as_we_write_it():
    header = (
        '{"code":10,"language":"PYTHON","version":399,"opaque":16909060,"flag":0,'
        '"serializeTypeCurrentRPC":"JSON","remark":"café",'
        '"extFields":{"topic":"GoldenTopic","queueId":"3"}}'
    ).encode()
    golden = golden_frame(0, header, BODY)
    assert encode_frame(command(SERIALIZE_JSON)) == golden
    assert FrameDecoder().feed(golden) == [command(SERIALIZE_JSON)]


def test_a_frame_with_a_json_header_as_a_java_peer_writes_it():
    """fastjson writes RemotingCommand's properties in name order, the language as its enum name,
    and ext field values that Java code put as numbers unquoted."""
    header = (
        '{"code":10,"extFields":{"queueId":3,"topic":"GoldenTopic"},"flag":0,"language":"JAVA",'
        '"opaque":16909060,"remark":"café","serializeTypeCurrentRPC":"JSON","version":399}'
    ).encode()
    golden = golden_frame(0, header, BODY)
    (decoded,) = FrameDecoder().feed(golden)
    assert decoded == command(SERIALIZE_JSON, language=JAVA)
