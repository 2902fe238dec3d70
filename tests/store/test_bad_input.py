"""Bad input is refused with a clear status and nothing is written."""

import pytest

from broker.common.message import MessageExt
from broker.store.results import PutMessageStatus


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("", "empty"),
        ("a" * 128, "longer than 127"),
        ("bad topic", "contains characters"),
        ("t/x", "characters"),
    ],
)
def test_illegal_topics_are_refused(open_store, topic, reason):
    store = open_store()
    result = store.put_message(MessageExt(topic=topic, body=b"x"))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and reason in result.remark
    assert store.max_physic_offset == 0


def test_oversized_message_and_batch_are_refused(open_store):
    store = open_store(max_message_size=64 * 1024)
    assert store.put_message(MessageExt(topic="t", body=b"ok")).ok
    end = store.max_physic_offset
    big = store.put_message(MessageExt(topic="t", body=bytes(64 * 1024)))
    assert big.status is PutMessageStatus.MESSAGE_ILLEGAL and "limit is 65536" in big.remark
    batch = store.put_messages([MessageExt(topic="t", body=bytes(20_000)) for _ in range(4)])
    assert batch.status is PutMessageStatus.MESSAGE_ILLEGAL and "batch" in batch.remark
    assert store.max_physic_offset == end
    store.wait_for_dispatch()
    assert store.get_max_offset_in_queue("t", 0) == 1


def test_properties_over_32k_are_refused(open_store):
    store = open_store()
    msg = MessageExt(topic="t", body=b"x")
    msg.put_user_property("huge", "v" * 33_000)
    result = store.put_message(msg)
    assert result.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.max_physic_offset == 0


def test_mixed_batch_is_refused_whole(open_store):
    store = open_store()
    batch = [MessageExt(topic="a", body=b"1"), MessageExt(topic="b", body=b"2")]
    result = store.put_messages(batch)
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and "one topic" in result.remark
    bad_member = [MessageExt(topic="a", body=b"1"), MessageExt(topic="a", body=bytes(5 * 1024 * 1024))]
    assert store.put_messages(bad_member).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages([]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_physic_offset == 0


def test_put_after_shutdown_is_refused(open_store):
    store = open_store()
    store.shutdown()
    assert (
        store.put_message(MessageExt(topic="t", body=b"x")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    )


def test_reserved_user_property_names_are_refused():
    with pytest.raises(ValueError, match="reserved"):
        MessageExt(topic="t").put_user_property("KEYS", "x")
