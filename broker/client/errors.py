"""Errors the SDK raises to applications."""

from broker.common.codes import code_name


class MQClientError(Exception):
    """A request the client refused or could not complete (bad input, no route, …)."""

    def __init__(self, message: str, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class MQBrokerError(MQClientError):
    """A broker or name server answered with an error code."""

    def __init__(self, response_code: int, remark: str | None, addr: str) -> None:
        super().__init__(
            f"{addr} answered {code_name(response_code)}: {remark or ''}".rstrip(": "), response_code
        )
        self.remark = remark
        self.addr = addr
