"""Client-side retry pieces that need no network: retry-topic restore and listener context values."""

from broker.client.push_consumer import _context_int, restore_retry_topic
from broker.common.message import MessageExt


def test_a_retry_delivery_shows_its_original_topic_only_for_this_group():
    msg = MessageExt("%RETRY%g1", b"x", properties={"RETRY_TOPIC": "Orders"})
    other = MessageExt("%RETRY%g2", b"x", properties={"RETRY_TOPIC": "Orders"})
    restore_retry_topic(msg, "g1")
    restore_retry_topic(other, "g1")
    assert (msg.topic, other.topic) == ("Orders", "%RETRY%g2")
    plain = MessageExt("Orders", b"x")
    restore_retry_topic(plain, "g1")
    assert plain.topic == "Orders"


def test_listener_context_values_are_read_leniently():
    assert _context_int({"delay_level_when_next_consume": "-1"}, "delay_level_when_next_consume", 0) == -1
    assert _context_int({"ack_index": "soon"}, "ack_index", 3) == 3
    assert _context_int({}, "ack_index", 3) == 3
