"""The client's one error tree, raised by the SDK and the admin client alike.

``MQClientError`` is every request the client refused or could not complete; below it, what a
caller may want to tell apart: a server's refusal (``MQBrokerError``: which server, which response
code, its remark), a thing that does not exist (``NotFoundError``), a server that does not answer
(``NameServerUnreachableError``, ``BrokerUnreachableError``). The messages are meant for an
operator: the console and ``mqadmin`` show them as they are.
"""

from __future__ import annotations

from broker.common.codes import code_name


class MQClientError(Exception):
    """A request the client refused or could not complete (bad input, no route, …)."""

    def __init__(self, message: str, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class MQBrokerError(MQClientError):
    """A broker or name server answered with an error code: names the server, the code and its remark.

    ``role`` ("broker", "name server") is given by callers that know which kind of server they
    asked (the admin client); the SDK's messages name the address only."""

    def __init__(self, response_code: int, remark: str | None, addr: str, role: str | None = None) -> None:
        server = f"{role} {addr}" if role else addr
        detail = f": {remark}" if remark else ""
        super().__init__(f"{server} answered {code_name(response_code)}{detail}", response_code)
        self.remark = remark
        self.addr = addr
        self.role = role

    @property
    def code(self) -> int:
        return self.response_code


class NotFoundError(MQClientError):
    """The thing asked about (topic route, cluster, group, message) does not exist."""


class ServerUnreachableError(MQClientError):
    """A server that could not be reached: no connection, or no answer in time."""

    role = "server"

    def __init__(self, addr: str, reason: str) -> None:
        self.addr = addr
        self.reason_text = reason
        super().__init__(f"cannot reach {self.role} {addr} ({reason})")


class NameServerUnreachableError(ServerUnreachableError):
    role = "name server"


class BrokerUnreachableError(ServerUnreachableError):
    role = "broker"
