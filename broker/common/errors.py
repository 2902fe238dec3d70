"""The project's one error tree: every failure of a request to another process (the SDK's, the
admin client's, the broker's own calls to name servers, controllers and its master).

::

    MQError                              any of them
    ├── RemotingError                    the transport (broker.remoting.errors: no connection, no answer)
    ├── MQClientError                    a request refused or not completed (bad input, no route, …)
    │   ├── MQBrokerError                a server's refusal: which server, RocketMQ's code, its remark
    │   ├── NotFoundError                the thing asked about does not exist
    │   └── ServerUnreachableError       a server that does not answer
    │       ├── NameServerUnreachableError
    │       └── BrokerUnreachableError
    └── ControllerError                  a controller's refusal (RocketMQ's code) or none reachable
        └── ControllerUnreachable

``ControllerError`` is a sibling of ``MQClientError``, not below it: callers that catch
``MQClientError`` around controller calls (the console) have always let controller failures
through to their own handler, and still do. The messages are meant for an operator: the console
and ``mqadmin`` show them as they are. The SDK's names stay importable from
``broker.client.errors`` and the controller's from ``broker.controller.client``.
"""

from __future__ import annotations

from broker.common.codes import code_name


class MQError(Exception):
    """Root of every failure of a request to another process."""


class MQClientError(MQError):
    """A request refused or not completed (bad input, no route, …)."""

    def __init__(self, message: str, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class MQBrokerError(MQClientError):
    """A broker or name server answered with an error code: names the server, the code and its remark.

    ``role`` ("broker", "name server", "master") is given by callers that know which kind of
    server they asked; the SDK's messages name the address only."""

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


class ControllerError(MQError):
    """A controller's refusal (``code`` is RocketMQ's), or no controller reachable (code None)."""

    def __init__(self, code: int | None, remark: str, address: str | None = None) -> None:
        super().__init__(f"{code_name(code)}: {remark}" if code is not None else remark)
        self.code = code
        self.remark = remark
        self.address = address  # the controller that answered (None: none did)


class ControllerUnreachable(ControllerError):
    """No controller given could be reached; ``remark`` says why for each."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__(None, "; ".join(failures))
