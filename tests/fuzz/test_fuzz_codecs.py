"""Hypothesis: the wire and store codecs turn any bytes into a value or their own documented
error, never another exception (a crash of the connection or the store) and never a hang."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common.batch_codec import MAX_BATCH_MESSAGES, BatchDecodeError, decode_batch, encode_batch
from broker.common.message import Message, MessageExt
from broker.common.message_codec import MessageDecodeError, decode_message, encode_message
from broker.common.register_body import MAX_INFLATED_BYTES, RegisterBodyError, decode_register_body
from broker.remoting.command import RemotingCommand
from broker.remoting.errors import FrameError
from broker.remoting.frame import FrameDecoder, encode_frame
from tests.fuzz.budget import LONG, QUICK

SMALL_FRAMES = 64 * 1024  # a decoder limit fuzzed frames can reach


def feed_all(chunks: list[bytes], max_frame: int = SMALL_FRAMES) -> list[RemotingCommand]:
    """Commands decoded from ``chunks`` fed one by one; FrameError is the only failure allowed."""
    decoder = FrameDecoder(max_frame)
    commands = []
    try:
        for chunk in chunks:
            commands += decoder.feed(chunk)
            assert decoder.pending_bytes <= max_frame  # never more than one frame's worth kept
    except FrameError:
        pass
    return commands


# -- frames -----------------------------------------------------------------------------------
def frame_bytes():
    """Bytes that look like frames often enough to get past the length checks."""
    length_prefixed = st.builds(
        lambda header, body, serialize: (
            (8 + len(header) + len(body) - 4).to_bytes(4, "big")
            + ((serialize << 24) | len(header)).to_bytes(4, "big")
            + header
            + body
        ),
        st.one_of(st.binary(max_size=200), st.sampled_from([b"{}", b'{"code":1}', b"[]", b"null"])),
        st.binary(max_size=50),
        st.sampled_from([0, 1, 2, 255]),
    )
    return st.lists(st.one_of(st.binary(max_size=300), length_prefixed), max_size=4).map(b"".join)


def _frame_case(data: bytes, cuts: list[int]) -> None:
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    for command in feed_all(chunks):
        assert isinstance(command, RemotingCommand)


@QUICK
@given(frame_bytes(), st.lists(st.integers(min_value=0), max_size=5))
def test_any_bytes_decode_to_commands_or_a_frame_error(data, cuts):
    _frame_case(data, cuts)


@pytest.mark.slow
@LONG
@given(frame_bytes(), st.lists(st.integers(min_value=0), max_size=5))
def test_any_bytes_decode_to_commands_or_a_frame_error_long(data, cuts):
    _frame_case(data, cuts)


text = st.text(max_size=40)
commands = st.builds(
    RemotingCommand,
    code=st.integers(min_value=-(2**15), max_value=2**15 - 1),
    remark=st.one_of(st.none(), text),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=20), text, max_size=5),
    body=st.binary(max_size=100),
    serialize_type=st.sampled_from([0, 1]),
)


@QUICK
@given(st.lists(commands, min_size=1, max_size=4), st.lists(st.integers(min_value=0), max_size=6))
def test_frames_cut_anywhere_decode_to_what_was_sent(sent, cuts):
    data = b"".join(encode_frame(c) for c in sent)
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    decoder = FrameDecoder()
    got = [c for chunk in chunks for c in decoder.feed(chunk)]
    # The binary header writes no remark and an empty one alike (RocketMQ's too): compare them so.
    assert [(c.code, c.remark or None, c.ext_fields, bytes(c.body)) for c in got] == [
        (c.code, c.remark or None, c.ext_fields, bytes(c.body)) for c in sent
    ]
    assert decoder.pending_bytes == 0


# -- stored messages ----------------------------------------------------------------------------
def stored_message_bytes():
    """Real records, then damaged: cut, bytes flipped, or random bytes in their place."""
    real = st.builds(
        lambda body, props: bytes(encode_message(MessageExt(topic="T", body=body, properties=props))),
        st.binary(max_size=64),
        st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3),
    )
    damaged = st.builds(
        lambda raw, at, value, cut: (
            raw[: at % (len(raw) + 1)] + bytes([value]) + raw[at % (len(raw) + 1) + 1 :]
        )[: cut % (len(raw) + 1) or None],
        real,
        st.integers(min_value=0),
        st.integers(0, 255),
        st.integers(min_value=0),
    )
    return st.one_of(st.binary(max_size=300), damaged)


@QUICK
@given(stored_message_bytes(), st.booleans(), st.booleans())
def test_any_bytes_decode_to_a_message_or_a_decode_error(raw, check_crc, decompress):
    try:
        decoded = decode_message(raw, check_crc=check_crc, decompress_body=decompress)
    except MessageDecodeError:
        return
    assert isinstance(decoded, MessageExt)


# -- batches ------------------------------------------------------------------------------------
def batch_bytes():
    real = st.lists(
        st.builds(
            Message,
            st.just("T"),
            st.binary(max_size=20),
            properties=st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=5), max_size=2),
        ),
        min_size=1,
        max_size=5,
    ).map(encode_batch)
    damaged = st.builds(
        lambda raw, at, value: raw[: at % (len(raw) + 1)] + bytes([value]) + raw[at % (len(raw) + 1) + 1 :],
        real,
        st.integers(min_value=0),
        st.integers(0, 255),
    )
    return st.one_of(st.binary(max_size=300), real, damaged)


@QUICK
@given(batch_bytes(), st.integers(min_value=1, max_value=MAX_BATCH_MESSAGES))
def test_any_bytes_decode_to_a_batch_or_a_batch_error(raw, max_messages):
    try:
        messages = decode_batch(raw, "T", max_messages)
    except BatchDecodeError:
        return
    assert len(messages) <= max_messages
    assert all(isinstance(m, Message) and m.topic == "T" for m in messages)


@QUICK
@given(
    st.lists(
        st.builds(Message, st.just("T"), st.binary(max_size=20), st.integers(0, 2**31 - 1)),
        min_size=1,
        max_size=8,
    )
)
def test_a_batch_decodes_to_what_was_encoded(messages):
    decoded = decode_batch(encode_batch(messages), "T")
    assert [(m.body, m.flag) for m in decoded] == [(bytes(m.body), m.flag) for m in messages]


# -- name-server registrations ------------------------------------------------------------------
@QUICK
@given(st.one_of(st.binary(max_size=300), st.builds(zlib.compress, st.binary(max_size=300))), st.booleans())
def test_any_registration_body_decodes_or_is_a_register_body_error(body, compressed):
    try:
        decoded = decode_register_body(body, compressed)
    except RegisterBodyError:
        return
    assert all(isinstance(config, dict) for config in decoded.topic_configs.values())


def test_a_registration_that_inflates_past_the_limit_is_refused():
    bomb = zlib.compress(bytes(MAX_INFLATED_BYTES + 1), 9)  # ~64 KB that inflate to 64 MiB + 1
    with pytest.raises(RegisterBodyError, match="inflates to more than"):
        decode_register_body(bomb, True)
