import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common import sysflag
from broker.common.java_hash import java_string_hash
from broker.common.message import MessageExt
from broker.common.message_codec import (
    MessageDecodeError,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    encode_blank,
    encode_message,
    patch_store_fields,
    properties_to_string,
    string_to_properties,
)
from broker.common.message_id import MessageIdGenerator, unique_id_ip, unique_id_timestamp

TOPIC_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%|_-"
prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=20
)
hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(lambda a: a.compressed), st.integers(0, 65535)),
)
messages = st.builds(
    MessageExt,
    topic=st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=127),
    body=st.binary(max_size=2048),
    flag=st.integers(-(2**31), 2**31 - 1),
    properties=st.dictionaries(prop_text.filter(bool), prop_text, max_size=6),
    queue_id=st.integers(0, 1023),
    queue_offset=st.integers(0, 2**62),
    sys_flag=st.sampled_from(
        [
            0,
            sysflag.COMPRESSED_FLAG,
            sysflag.MULTI_TAGS_FLAG,
            sysflag.TRANSACTION_PREPARED_TYPE,
            sysflag.TRANSACTION_COMMIT_TYPE,
            sysflag.TRANSACTION_ROLLBACK_TYPE,
        ]
    ),
    born_timestamp=st.integers(0, 2**62),
    born_host=hosts,
    store_timestamp=st.integers(0, 2**62),
    store_host=hosts,
    commitlog_offset=st.integers(0, 2**62),
    reconsume_times=st.integers(0, 2**31 - 1),
    prepared_transaction_offset=st.integers(0, 2**62),
)


def _canonical_host(host):
    import ipaddress

    return ipaddress.ip_address(host[0]), host[1]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_encode_decode_identity(msg):
    encoded = encode_message(msg)
    decoded = decode_message(encoded, check_crc=True)
    assert decoded.store_size == len(encoded)
    assert decoded.topic == msg.topic
    assert decoded.body == msg.body
    assert decoded.flag == msg.flag
    assert decoded.properties == msg.properties
    assert (decoded.queue_id, decoded.queue_offset) == (msg.queue_id, msg.queue_offset)
    assert decoded.commitlog_offset == msg.commitlog_offset
    assert decoded.born_timestamp == msg.born_timestamp
    assert decoded.store_timestamp == msg.store_timestamp
    assert _canonical_host(decoded.born_host) == _canonical_host(msg.born_host)
    assert _canonical_host(decoded.store_host) == _canonical_host(msg.store_host)
    assert decoded.reconsume_times == msg.reconsume_times
    assert decoded.prepared_transaction_offset == msg.prepared_transaction_offset
    assert decoded.sys_flag & ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG) == msg.sys_flag
    assert decoded.body_crc == zlib.crc32(msg.body) & 0x7FFFFFFF
    assert decode_offset_msg_id(decoded.msg_id) == (decoded.store_host, msg.commitlog_offset)


@settings(max_examples=500)
@given(st.binary(max_size=400))
def test_random_bytes_never_crash_the_decoder(data):
    try:
        decode_message(data)
    except MessageDecodeError:
        pass
    try:
        decode_messages(data)
    except MessageDecodeError:
        pass


@settings(max_examples=200)
@given(messages, st.data())
def test_truncated_or_flipped_records_give_a_clean_error(msg, data):
    raw = encode_message(msg)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(MessageDecodeError):
        decode_message(raw[:cut])
    flipped = bytearray(raw)
    index = data.draw(st.integers(0, len(raw) - 1))
    flipped[index] ^= 0xFF
    try:
        decode_message(flipped, check_crc=True)
    except MessageDecodeError:
        pass


def test_crc_mismatch_detected():
    msg = MessageExt(topic="T", body=b"payload")
    raw = encode_message(msg)
    raw[-(len("T") + 3 + 3)] ^= 1  # a body byte
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_message(raw, check_crc=True)


def test_concatenation_stops_at_blank_record():
    a = encode_message(MessageExt(topic="A", body=b"1"))
    b = encode_message(MessageExt(topic="B", body=b"2"))
    decoded = decode_messages(bytes(a + b) + encode_blank(64) + b"\0" * 56)
    assert [m.topic for m in decoded] == ["A", "B"]


def test_patch_store_fields_in_place():
    raw = encode_message(MessageExt(topic="T", body=b"x", born_host=("::1", 1)))
    patch_store_fields(raw, 0, 41, 4242, 1700000000000)
    decoded = decode_message(raw)
    assert (decoded.queue_offset, decoded.commitlog_offset, decoded.store_timestamp) == (
        41,
        4242,
        1700000000000,
    )


def test_properties_format_matches_rocketmq():
    text = properties_to_string({"TAGS": "a", "KEYS": "k1 k2"})
    assert text == "TAGS\x01a\x02KEYS\x01k1 k2\x02"
    assert string_to_properties(text) == {"TAGS": "a", "KEYS": "k1 k2"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),
        ("hello world", 1794106052),
        ("中文", 646394),
        ("x" * 40, 847293440),
        ("Topic#key-1", -150684721),
    ],
)
def test_java_string_hash_matches_java(text, expected):
    # Expected values printed by Java 17's String.hashCode on this machine.
    assert java_string_hash(text) == expected


def test_offset_msg_id_layout():
    msg = MessageExt(topic="T", store_host=("10.0.0.1", 10911), commitlog_offset=1234)
    decoded = decode_message(encode_message(msg))
    assert decoded.msg_id == "0A00000100002A9F00000000000004D2"
    with pytest.raises(MessageDecodeError):
        decode_offset_msg_id("not-hex")


def test_unique_ids_are_unique_and_carry_ip_and_time():
    generator = MessageIdGenerator(ip=bytes([192, 168, 1, 7]), pid=4321)
    now = 1_763_800_000_000
    ids = {generator.next_id(now) for _ in range(1000)}
    assert len(ids) == 1000
    sample = next(iter(ids))
    assert len(sample) == 32 and sample == sample.upper()
    assert unique_id_ip(sample) == "192.168.1.7"
    assert unique_id_timestamp(sample, reference_ms=now + 5) == now
