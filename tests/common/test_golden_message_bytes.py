"""Golden bytes of the stored-message layout and of a batch body, written field by field here from
RocketMQ's layout (MessageDecoder.encode/decode and CommitLog's record, MessageDecoder.encodeMessage
for a batch element) and not through the codec's own ``struct`` formats: a round trip passes even
when encoder and decoder agree on a wrong order or size, these do not."""

from __future__ import annotations

import struct
import zlib

from broker.common.batch_codec import decode_batch, encode_batch
from broker.common.message import Message, MessageExt
from broker.common.message_codec import decode_message, decode_messages, encode_message, patch_store_fields

TOPIC = "GoldenTopic"
BODY = b'{"order": 42}'
# Properties as RocketMQ writes them: name \x01 value \x02, in the map's order.
PROPERTIES = {"KEYS": "order-42", "TAGS": "created"}
PROPERTIES_BYTES = b"KEYS\x01order-42\x02TAGS\x01created\x02"
# UtilAll.crc32: CRC32 of the body with the sign bit cleared.
BODY_CRC = zlib.crc32(BODY) & 0x7FFFFFFF

QUEUE_ID, FLAG, QUEUE_OFFSET, PHYSICAL_OFFSET = 3, 7, 1234, 0x0000000102030405
BORN_TS, STORE_TS = 1_700_000_000_123, 1_700_000_000_456
RECONSUME_TIMES, PREPARED_TX_OFFSET = 2, 0x1122334455
MULTI_TAGS_FLAG = 0x2  # MessageSysFlag.MULTI_TAGS_FLAG: any bit outside the IPv6 ones will do
BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG = 0x1 << 4, 0x1 << 5


def be(fmt: str, value) -> bytes:
    """One big-endian field (Java's ByteBuffer order)."""
    return struct.pack(">" + fmt, value)


def golden_record(born: bytes, store: bytes, sys_flag: int) -> bytes:
    """A commit-log record; ``born``/``store`` are the address bytes + port int as RocketMQ puts
    them (4 + 4 for IPv4, 16 + 4 for IPv6)."""
    topic = TOPIC.encode()
    rest = b"".join([
        be("i", QUEUE_ID),                   # 4  QUEUEID
        be("i", FLAG),                       # 5  FLAG
        be("q", QUEUE_OFFSET),               # 6  QUEUEOFFSET
        be("q", PHYSICAL_OFFSET),            # 7  PHYSICALOFFSET (commit-log offset)
        be("i", sys_flag),                   # 8  SYSFLAG
        be("q", BORN_TS),                    # 9  BORNTIMESTAMP
        born,                                # 10 BORNHOST (address, then port as int)
        be("q", STORE_TS),                   # 11 STORETIMESTAMP
        store,                               # 12 STOREHOSTADDRESS
        be("i", RECONSUME_TIMES),            # 13 RECONSUMETIMES
        be("q", PREPARED_TX_OFFSET),         # 14 Prepared Transaction Offset
        be("i", len(BODY)), BODY,            # 15 BODY: length int + bytes
        be("B", len(topic)), topic,          # 16 TOPIC: length byte + bytes (magic code V1)
        be("h", len(PROPERTIES_BYTES)),      # 17 propertiesLength short
        PROPERTIES_BYTES,                    #    + properties
    ])  # fmt: skip
    head = be("I", 0xDAA320A7) + be("i", BODY_CRC)  # 2 MAGICCODE, 3 BODYCRC
    return be("i", 4 + len(head) + len(rest)) + head + rest  # 1 TOTALSIZE counts itself


def message(born_host, store_host, sys_flag: int, msg_id: str, store_size: int) -> MessageExt:
    return MessageExt(
        TOPIC, BODY, FLAG, dict(PROPERTIES), QUEUE_ID, store_size, QUEUE_OFFSET, sys_flag, BORN_TS,
        born_host, STORE_TS, store_host, msg_id, PHYSICAL_OFFSET, BODY_CRC, RECONSUME_TIMES,
        PREPARED_TX_OFFSET,
    )  # fmt: skip


IPV4_BORN = bytes([10, 1, 2, 3]) + be("i", 54321)
IPV4_STORE = bytes([192, 168, 0, 9]) + be("i", 10911)
# offsetMsgId: store host bytes (address + port) then the commit-log offset as a long, hex, upper case.
IPV4_MSG_ID = "C0A8000900002A9F0000000102030405"


def test_an_ipv4_record_has_rocketmqs_bytes():
    golden = golden_record(IPV4_BORN, IPV4_STORE, MULTI_TAGS_FLAG)
    assert len(golden) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 13 + 1 + 11 + 2 + 27
    expected = message(("10.1.2.3", 54321), ("192.168.0.9", 10911), MULTI_TAGS_FLAG, IPV4_MSG_ID, len(golden))
    assert bytes(encode_message(expected)) == golden
    assert decode_message(golden) == expected
    assert decode_messages(golden + golden) == [expected, expected]  # a pull body: records back to back


def test_an_ipv6_record_has_rocketmqs_bytes():
    born = bytes.fromhex("20010db8000000000000000000000001") + be("i", 40000)
    store = bytes.fromhex("fe800000000000000000000000000002") + be("i", 10911)
    sys_flag = MULTI_TAGS_FLAG | BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
    golden = golden_record(born, store, sys_flag)
    msg_id = "FE80000000000000000000000000000200002A9F0000000102030405"
    expected = message(("2001:db8::1", 40000), ("fe80::2", 10911), sys_flag, msg_id, len(golden))
    assert bytes(encode_message(expected)) == golden
    assert decode_message(golden) == expected


def test_store_fields_are_patched_where_rocketmq_reads_them():
    """The store encodes a record before it knows the offsets and time, then patches them: at
    byte 20 (queue offset), 28 (MESSAGE_PHYSIC_OFFSET_POSITION) and 56
    (MESSAGE_STORE_TIMESTAMP_POSITION, IPv4 born host)."""
    unpatched = MessageExt(
        TOPIC, BODY, FLAG, dict(PROPERTIES), QUEUE_ID, sys_flag=MULTI_TAGS_FLAG, born_timestamp=BORN_TS,
        born_host=("10.1.2.3", 54321), store_host=("192.168.0.9", 10911), reconsume_times=RECONSUME_TIMES,
        prepared_transaction_offset=PREPARED_TX_OFFSET,
    )  # fmt: skip
    record = encode_message(unpatched)
    patch_store_fields(record, 0, QUEUE_OFFSET, PHYSICAL_OFFSET, STORE_TS)
    golden = golden_record(IPV4_BORN, IPV4_STORE, MULTI_TAGS_FLAG)
    assert bytes(record) == golden
    assert struct.unpack_from(">q", golden, 56)[0] == STORE_TS


# -- batch ----------------------------------------------------------------------------------------


def golden_batch_element(body: bytes, flag: int, properties: bytes, body_crc: int) -> bytes:
    rest = b"".join([
        be("i", flag),                        # 4 FLAG
        be("i", len(body)), body,             # 5 BODY: length int + bytes
        be("h", len(properties)), properties, # 6 properties: length short + bytes
    ])  # fmt: skip
    head = be("i", 0) + be("i", body_crc)  # 2 MAGICCODE (always 0 in a batch), 3 BODYCRC
    return be("i", 4 + len(head) + len(rest)) + head + rest  # 1 TOTALSIZE counts itself


BATCH = [
    Message("BatchTopic", b"first", 0, {"KEYS": "a"}),
    Message("BatchTopic", b"second!", 5, {}),
]


def test_a_batch_body_rocketmq_clients_send_is_read():
    """RocketMQ's client (MessageDecoder.encodeMessages) writes 0 as each element's body CRC; the
    broker computes its own, so the field is never read."""
    golden = golden_batch_element(b"first", 0, b"KEYS\x01a\x02", 0) + golden_batch_element(
        b"second!", 5, b"", 0
    )
    assert decode_batch(golden, "BatchTopic") == BATCH


def test_a_batch_body_we_send_has_rocketmqs_layout():
    """Ours fills the CRC field (which brokers ignore) where RocketMQ's client writes 0."""
    golden = golden_batch_element(
        b"first", 0, b"KEYS\x01a\x02", zlib.crc32(b"first") & 0x7FFFFFFF
    ) + golden_batch_element(b"second!", 5, b"", zlib.crc32(b"second!") & 0x7FFFFFFF)
    assert encode_batch(BATCH) == golden
    assert decode_batch(golden, "BatchTopic") == BATCH
