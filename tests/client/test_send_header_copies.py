"""The SDK's spelled-out send encoder and answer reader are copies of the header classes' own
(kept for speed on the send path): they must write and read exactly what the classes do."""

from typing import Any

import pytest

from broker.client.client_api import send_answer, send_fields
from broker.common.request_headers import HeaderError, SendMessageRequestHeader, SendMessageResponseHeader

REQUIRED: dict[str, Any] = {
    "producer_group": "pg",
    "topic": "T",
    "default_topic": "TBW102",
    "default_topic_queue_nums": 4,
    "queue_id": 1,
    "sys_flag": 0,
    "born_timestamp": 1_700_000_000_000,
    "flag": 0,
}


@pytest.mark.parametrize(
    "optional",
    [
        {},
        {"properties": "UNIQ_KEY\x01abc\x02", "reconsume_times": 0, "unit_mode": False, "batch": True},
        {"properties": "", "max_reconsume_times": 3, "unit_mode": True},
    ],
)
def test_send_fields_write_what_the_header_class_writes(optional):
    header = SendMessageRequestHeader(**REQUIRED, **optional)
    assert list(send_fields(header).items()) == list(header.to_ext_fields().items())


@pytest.mark.parametrize(
    "fields",
    [
        {"msgId": "AB" * 16, "queueId": "1", "queueOffset": "123"},
        {"msgId": "AB" * 16, "queueId": "0", "queueOffset": "7", "MSG_REGION": "R", "TRACE_ON": "true"},
    ],
)
def test_send_answer_reads_what_the_header_class_reads(fields):
    assert send_answer(fields) == SendMessageResponseHeader.from_ext_fields(fields)


def test_a_malformed_send_answer_is_refused_as_the_header_class_refuses_it():
    with pytest.raises(HeaderError):
        send_answer({"msgId": "x", "queueId": "one", "queueOffset": "1"})
    with pytest.raises(HeaderError):
        send_answer({"queueId": "1", "queueOffset": "1"})
