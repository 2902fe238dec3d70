"""A server's answer whose header lacks a field RocketMQ's servers always send, or carries a number
that does not parse, is an error naming the server and the field: not a crash, not a silent 0.

The answers here are written as raw dicts on purpose (the fake server sends what it is given);
well-formed ones come from tests/cli/fake_server.py's helpers, built from the header classes.
"""

from __future__ import annotations

import pytest

from broker.cli import main
from broker.client.admin import AsyncMQAdmin
from broker.client.errors import MQClientError
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from tests.cli.fake_server import FakeServer, broker_config, ok


@pytest.fixture
def broker():
    srv = FakeServer()
    yield srv
    srv.close()


async def test_pull_answer_without_suggest_which_broker_id_names_broker_and_field(broker):
    # The answer our fake sent before it learned suggestWhichBrokerId.
    answer = {"nextBeginOffset": 3, "minOffset": 0, "maxOffset": 3}
    broker.on(RC.PULL_MESSAGE, lambda ext, body: (ResponseCode.PULL_NOT_FOUND, answer, None, None))
    async with AsyncMQAdmin([]) as admin:
        with pytest.raises(MQClientError) as caught:
            await admin.pull_messages(broker.addr, "T", 0, 0)
    assert (
        str(caught.value) == f"broker {broker.addr} answered without the header field 'suggestWhichBrokerId'"
    )


async def test_offset_that_is_no_number_names_broker_and_field(broker):
    broker.on(RC.GET_MAX_OFFSET, lambda ext, body: ok(offset="12x"))
    broker.on(RC.GET_MIN_OFFSET, lambda ext, body: ok())
    async with AsyncMQAdmin([]) as admin:
        with pytest.raises(
            MQClientError, match=r"with the header field 'offset'='12x', which is not a number"
        ):
            await admin.max_offset(broker.addr, "T", 0)
        with pytest.raises(MQClientError, match=r"without the header field 'offset'"):
            await admin.min_offset(broker.addr, "T", 0)


async def test_committed_offset_left_out_reads_as_none_committed(broker):
    # As the SDK reads it: QUERY_NOT_FOUND, or SUCCESS without an offset, is "no committed offset".
    broker.on(RC.QUERY_CONSUMER_OFFSET, lambda ext, body: ok())
    async with AsyncMQAdmin([]) as admin:
        assert await admin.query_consumer_offset(broker.addr, "G", "T", 0) == -1
        broker.on(RC.QUERY_CONSUMER_OFFSET, lambda ext, body: ok(offset=""))
        assert await admin.query_consumer_offset(broker.addr, "G", "T", 0) == -1
        broker.on(RC.QUERY_CONSUMER_OFFSET, lambda ext, body: ok(offset="x"))
        with pytest.raises(MQClientError, match=r"'offset'='x', which is not a number"):
            await admin.query_consumer_offset(broker.addr, "G", "T", 0)


async def test_broker_config_without_version_or_with_bad_pending_restart(broker):
    broker.on(RC.GET_BROKER_CONFIG, lambda ext, body: ok("brokerName=a\n"))
    async with AsyncMQAdmin([]) as admin:
        with pytest.raises(MQClientError, match=r"without the header field 'version'"):
            await admin.broker_config_state(broker.addr)
        broker.on(RC.GET_BROKER_CONFIG, lambda ext, body: broker_config({"brokerName": "a"}, "[1]"))
        with pytest.raises(MQClientError, match=r"'pendingRestart' that is no JSON object"):
            await admin.broker_config_state(broker.addr)
        broker.on(RC.GET_BROKER_CONFIG, lambda ext, body: broker_config({"brokerName": "a"}, '{"x":1}'))
        state = await admin.broker_config_state(broker.addr)
    assert (state.values, state.pending) == ({"brokerName": "a"}, {"x": "1"})


def test_cli_reports_a_malformed_answer_as_an_error(broker, capsys):
    broker.on(RC.GET_BROKER_CONFIG, lambda ext, body: ok("brokerName=a\n"))
    code = main(["getBrokerConfig", "-b", broker.addr])
    err = capsys.readouterr().err
    assert code == 1 and f"broker {broker.addr} answered without the header field 'version'" in err
