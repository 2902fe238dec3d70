"""Failures of the transport itself (as opposed to error responses from a peer)."""

from broker.common.errors import MQError


class RemotingError(MQError):
    """Base class of transport failures: the transport's branch of the one error tree
    (:mod:`broker.common.errors`)."""


class RemotingConnectError(RemotingError):
    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"cannot connect to {addr}: {reason}")
        self.addr = addr


class RemotingTimeoutError(RemotingError):
    def __init__(self, addr: str, timeout_ms: int, code: int) -> None:
        super().__init__(f"no response from {addr} within {timeout_ms} ms (request code {code})")
        self.addr = addr


class RemotingSendRequestError(RemotingError):
    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"request to {addr} failed: {reason}")
        self.addr = addr


class RemotingTooMuchRequestError(RemotingError):
    """Not sent: too many requests were already waiting for answers (RocketMQ's
    RemotingTooMuchRequestException)."""


class FrameError(RemotingError):
    """Bytes on the wire that are not a valid RocketMQ frame or header."""
