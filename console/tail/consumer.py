"""The websocket end of a live tail: one socket, one topic, its own filter and pause state.

Browser → server (JSON): ``{"action": "filter", "tags": "", "sql": "", "key": ""}``,
``{"action": "pause"}``, ``{"action": "resume"}``.
Server → browser: ``{"type": "messages", "events": [...], "skipped": n}`` (messages that passed the
filter; ``skipped`` counts those that did not), ``{"type": "status", ...}``, ``{"type": "filter",
"ok": bool, "error": str}``, ``{"type": "paused"}``, ``{"type": "held", "held": n, "dropped": n}``
while paused, and on resume ``{"type": "resumed", "missed": n, "held": n, "dropped": n}`` followed
by the held messages as one ``messages`` event.

While paused, matching messages are held (the newest ``BUFFER_SIZE``, as many as the page keeps;
older ones are counted as dropped) and shown on resume, so pausing to read never loses what came
meanwhile beyond what the page would have scrolled away anyway.
"""

from __future__ import annotations

from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from broker.common.topic_config import validate_topic
from core import cluster_access
from core.roles import VIEWER, has_role

from .filters import TailFilter, TailFilterError, compile_filter
from .pump import group_name, registry

CLOSE_NOT_ALLOWED = 4403
CLOSE_BAD_TOPIC = 4400
# Rows the tail page keeps, and so the most messages a paused socket holds for it.
BUFFER_SIZE = 500


class TailConsumer(AsyncJsonWebsocketConsumer):
    # While paused: the matching messages held (newest BUFFER_SIZE), how many of them fell off the
    # front, and how many did not match the filter.
    held: deque[dict]
    dropped: int
    skipped_while_paused: int

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
        self._clear_held()
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
            # Held messages are shown under the filter in force when the tail resumes.
            self.held = deque((e for e in self.held if self.filter.matches(e)), maxlen=BUFFER_SIZE)
            await self.send_json({"type": "filter", "ok": True, "filter": self.filter.source})
        elif action == "pause":
            self.paused = True
            self._clear_held()
            await self.send_json({"type": "paused"})
        elif action == "resume":
            await self._resume()
        else:
            await self.send_json(
                {"type": "error", "error": f"unknown action {action!r}: use filter, pause, resume"}
            )

    def _clear_held(self) -> None:
        self.held = deque(maxlen=BUFFER_SIZE)
        self.dropped = 0
        self.skipped_while_paused = 0

    async def _resume(self) -> None:
        self.paused = False
        held, dropped = list(self.held), self.dropped
        await self.send_json(
            {"type": "resumed", "missed": len(held) + dropped, "held": len(held), "dropped": dropped}
        )
        if held or self.skipped_while_paused:
            await self.send_json({"type": "messages", "events": held, "skipped": self.skipped_while_paused})
        self._clear_held()

    async def tail_messages(self, event: dict) -> None:
        matched = [e for e in event["events"] if self.filter.matches(e)]
        skipped = len(event["events"]) - len(matched)
        if self.paused:
            self.dropped += max(0, len(self.held) + len(matched) - BUFFER_SIZE)
            self.held.extend(matched)
            self.skipped_while_paused += skipped
            if matched:
                await self.send_json({"type": "held", "held": len(self.held), "dropped": self.dropped})
            return
        if event["events"]:
            await self.send_json(
                {"type": "messages", "events": matched, "skipped": skipped, "received": event.get("received")}
            )

    async def tail_status(self, event: dict) -> None:
        await self.send_json({**event, "type": "status"})
