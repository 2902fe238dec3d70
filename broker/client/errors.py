"""The client's errors, raised by the SDK and the admin client alike.

They live in the project's one error tree (:mod:`broker.common.errors`, whose docstring draws it);
this module keeps the SDK's public names importable where they always were.
"""

from __future__ import annotations

from broker.common.errors import (
    BrokerUnreachableError,
    MQBrokerError,
    MQClientError,
    MQError,
    NameServerUnreachableError,
    NotFoundError,
    ServerUnreachableError,
)

__all__ = [
    "BrokerUnreachableError",
    "MQBrokerError",
    "MQClientError",
    "MQError",
    "NameServerUnreachableError",
    "NotFoundError",
    "ServerUnreachableError",
]
