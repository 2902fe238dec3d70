"""``answer_header``: a server's answer read through its response header class; a field the server
had to send left out, or a number that does not parse, is an ``MQClientError`` naming the server
and the field (the SDK's offset readers and the admin client read answers through it)."""

from __future__ import annotations

import pytest

from broker.client.client_api import answer_header
from broker.client.errors import MQClientError
from broker.common.request_headers import GetMaxOffsetResponseHeader, QueryConsumerOffsetResponseHeader
from broker.remoting.command import RemotingCommand


def answer(**fields: str) -> RemotingCommand:
    return RemotingCommand(code=0, ext_fields=fields)


def test_a_well_formed_answer_is_decoded():
    assert answer_header(GetMaxOffsetResponseHeader, answer(offset="42"), "10.0.0.1:10911").offset == 42
    # An optional field left out is None (the SDK reads a committed offset left out as none).
    assert answer_header(QueryConsumerOffsetResponseHeader, answer(), "10.0.0.1:10911").offset is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "broker 10.0.0.1:10911 answered without the header field 'offset'"),
        ({"offset": ""}, "broker 10.0.0.1:10911 answered without the header field 'offset'"),
        (
            {"offset": "4x"},
            "broker 10.0.0.1:10911 answered with the header field 'offset'='4x', which is not a number",
        ),
    ],
)
def test_a_malformed_answer_names_the_server_and_the_field(fields, message):
    with pytest.raises(MQClientError) as caught:
        answer_header(GetMaxOffsetResponseHeader, answer(**fields), "broker 10.0.0.1:10911")
    assert str(caught.value) == message
