"""A request a broker sends to a client (reset offset, running info, consume directly) whose header
the client cannot read is answered by the remoting layer's one failure answer
(connection.failure_response): SYSTEM_ERROR with the decoder's reason, logged in one line."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from broker.client import client_requests
from broker.common.codes import RequestCode, ResponseCode
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request, response_to
from broker.remoting.connection import RemotingConnection
from broker.remoting.server import RemotingServer

ASK_THE_CLIENT = 9_001  # the test server's own code: "send the client this malformed request"


async def test_a_malformed_header_from_the_broker_gets_the_one_failure_answer(caplog):
    caplog.set_level(logging.WARNING, logger="broker.remoting.connection")
    server = RemotingServer("127.0.0.1", 0)

    async def ask_the_client(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        malformed = create_request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {"topic": "T", "group": "G", "timestamp": "soon"}
        )
        answer = await conn.invoke(malformed, 5000)
        return response_to(request, answer.code, answer.remark)

    server.register_processor(ASK_THE_CLIENT, ask_the_client)
    await server.start()
    client = RemotingClient()
    client_requests.register(SimpleNamespace(remoting=client, consumers={}))
    try:
        answer = await client.invoke(f"127.0.0.1:{server.port}", create_request(ASK_THE_CLIENT), 5000)
    finally:
        await client.close()
        await server.stop()
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark is not None and "timestamp" in answer.remark and "soon" in answer.remark
    refused = [r for r in caplog.records if r.getMessage().startswith("refused request code 220")]
    assert len(refused) == 1 and refused[0].exc_info is None
