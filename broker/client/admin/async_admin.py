"""``AsyncMQAdmin``: every admin request as a coroutine (for ASGI views and other coroutines)."""

from __future__ import annotations

from .acl import AclRequests
from .groups import GroupRequests
from .messages import MessageRequests
from .topics import ClusterRequests


class AsyncMQAdmin(ClusterRequests, GroupRequests, MessageRequests, AclRequests):
    """The admin client's asyncio core; ``MQAdmin`` is the blocking face of the same methods.
    Reusable across calls; close it when done.

    ``namesrv_addr`` is RocketMQ's ``host:port;host:port`` list. Name servers are tried in order
    (they hold the same state, N3), so one dead name server does not fail a command.
    """

    async def __aenter__(self) -> AsyncMQAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
