"""The websocket end of a live tail: one socket, one topic, its own filter and pause state.

Browser → server (JSON): ``{"action": "filter", "tags": "", "sql": "", "key": ""}``,
``{"action": "pause"}``, ``{"action": "resume"}``.
Server → browser: ``{"type": "messages", "events": [...], "skipped": n}`` (messages that passed the
filter; ``skipped`` counts those that did not), ``{"type": "status", ...}``, ``{"type": "filter",
"ok": bool, "error": str}``, ``{"type": "paused"|"resumed", "missed": n}``.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from broker.common.topic_config import validate_topic
from console import cluster_access
from console.roles import VIEWER, has_role

from .filters import TailFilter, TailFilterError, compile_filter
from .pump import group_name, registry

CLOSE_NOT_ALLOWED = 4403
CLOSE_BAD_TOPIC = 4400


class TailConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(has_role)(user, VIEWER):
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        self.topic = self.scope["url_route"]["kwargs"]["topic"]
        problem = validate_topic(self.topic)
        if problem:
            await self.close(code=CLOSE_BAD_TOPIC)
            return
        self.filter = TailFilter()
        self.paused = False
        self.missed = 0
        self.group = group_name(self.topic)
        await self.accept()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await registry.subscribe(self.topic, await database_sync_to_async(self._namesrv)())
        self.subscribed = True

    def _namesrv(self) -> str:
        """The name server the user picked in the console (kept in the session), as pages use."""
        choices = cluster_access.namesrv_choices()
        session = self.scope.get("session")
        chosen = session.get(cluster_access.SESSION_KEY) if session is not None else None
        return chosen if chosen in choices else (choices[0] if choices else "")

    async def disconnect(self, code: int) -> None:
        if getattr(self, "subscribed", False):
            self.subscribed = False
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await registry.unsubscribe(self.topic)

    async def receive_json(self, content, **kwargs) -> None:
        action = content.get("action") if isinstance(content, dict) else None
        if action == "filter":
            try:
                self.filter = compile_filter(
                    content.get("tags", ""), content.get("sql", ""), content.get("key", "")
                )
            except TailFilterError as exc:
                await self.send_json({"type": "filter", "ok": False, "error": str(exc)})
                return
            await self.send_json({"type": "filter", "ok": True, "filter": self.filter.source})
        elif action == "pause":
            self.paused, self.missed = True, 0
            await self.send_json({"type": "paused"})
        elif action == "resume":
            self.paused = False
            await self.send_json({"type": "resumed", "missed": self.missed})
        else:
            await self.send_json(
                {"type": "error", "error": f"unknown action {action!r}: use filter, pause, resume"}
            )

    async def tail_messages(self, event: dict) -> None:
        matched = [e for e in event["events"] if self.filter.matches(e)]
        if self.paused:
            self.missed += len(matched)
            return
        if matched or len(event["events"]):
            await self.send_json(
                {
                    "type": "messages",
                    "events": matched,
                    "skipped": len(event["events"]) - len(matched),
                    "received": event.get("received"),
                }
            )

    async def tail_status(self, event: dict) -> None:
        await self.send_json({**event, "type": "status"})
