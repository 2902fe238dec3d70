"""Producers and consumers connected to this broker, by group (from their heartbeats)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.common.codes import LanguageCode
from broker.remoting.connection import RemotingConnection


@dataclass
class ClientChannel:
    connection: RemotingConnection
    client_id: str
    language: int
    version: int
    last_update_ms: int

    def to_connection_json(self) -> dict:
        try:
            language = LanguageCode(self.language).name
        except ValueError:
            language = "OTHER"
        return {
            "clientId": self.client_id,
            "clientAddr": getattr(self.connection, "remote_addr", ""),
            "language": language,
            "version": self.version,
        }


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)  # client id → channel
    subscriptions: dict[str, dict] = field(default_factory=dict)  # topic → SubscriptionData JSON

    def client_ids(self) -> list[str]:
        return sorted(self.channels)

    def subscription_table_json(self) -> dict[str, dict]:
        """ConsumerConnection's subscriptionTable: each subscription as RocketMQ's broker writes
        the SubscriptionData it read from the heartbeat (its fields only, Java's defaults for the
        ones a client left out), whatever else the client put in its heartbeat."""
        return {topic: subscription_data_json(data) for topic, data in self.subscriptions.items()}


def subscription_data_json(data: dict) -> dict:
    """A heartbeat's subscription with SubscriptionData's fields and types; None where Java's
    field would be null (so the body leaves it out)."""
    sub_string, expression_type = data.get("subString"), data.get("expressionType", "TAG")
    return {
        "classFilterMode": data.get("classFilterMode") is True,
        "topic": data.get("topic") if isinstance(data.get("topic"), str) else None,
        "subString": sub_string if isinstance(sub_string, str) else None,
        "tagsSet": [t for t in _items(data.get("tagsSet")) if isinstance(t, str)],
        "codeSet": [c for c in _items(data.get("codeSet")) if _is_int(c)],
        "subVersion": data["subVersion"] if _is_int(data.get("subVersion")) else now_ms(),
        "expressionType": expression_type if isinstance(expression_type, str) else None,
    }


def _items(value) -> list:
    return value if isinstance(value, list) else []


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def now_ms() -> int:
    return int(time.time() * 1000)


class ConsumerManager:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, group: str, channel: ClientChannel, data: dict) -> bool:
        """Record a consumer heartbeat; True when the group's membership or subscriptions changed."""
        info = self.groups.setdefault(group, ConsumerGroupInfo(group))
        info.consume_type = data.get("consumeType", info.consume_type)
        info.message_model = data.get("messageModel", info.message_model)
        info.consume_from_where = data.get("consumeFromWhere", info.consume_from_where)
        changed = channel.client_id not in info.channels
        info.channels[channel.client_id] = channel
        subscriptions = {s["topic"]: s for s in data.get("subscriptionDataSet") or [] if s.get("topic")}
        if {t: s.get("subString") for t, s in subscriptions.items()} != {
            t: s.get("subString") for t, s in info.subscriptions.items()
        }:
            changed = True
        info.subscriptions = subscriptions
        return changed

    def unregister(self, group: str, client_id: str) -> bool:
        info = self.groups.get(group)
        if info is None or info.channels.pop(client_id, None) is None:
            return False
        if not info.channels:
            del self.groups[group]
        return True

    def drop_connection(self, connection) -> list[str]:
        """Remove a closed connection's consumers; return the groups that lost a member."""
        return self._remove_channels(lambda channel: channel.connection is connection)

    def expire_idle(self, max_idle_ms: int) -> list[str]:
        limit = now_ms() - max_idle_ms
        return self._remove_channels(lambda channel: channel.last_update_ms < limit)

    def _remove_channels(self, gone: Callable[[ClientChannel], bool]) -> list[str]:
        """Remove every consumer channel ``gone`` names, and groups left without one; return the
        group of each removed channel (a group once per channel it lost)."""
        affected = []
        for group, info in list(self.groups.items()):
            for client_id, channel in list(info.channels.items()):
                if gone(channel):
                    del info.channels[client_id]
                    affected.append(group)
            if not info.channels:
                del self.groups[group]
        return affected

    def groups_subscribing(self, topic: str) -> set[str]:
        return {g for g, info in self.groups.items() if topic in info.subscriptions}


class ProducerManager:
    def __init__(self) -> None:
        self.groups: dict[str, dict[str, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        self.groups.setdefault(group, {})[channel.client_id] = channel

    def unregister(self, group: str, client_id: str) -> None:
        channels = self.groups.get(group, {})
        channels.pop(client_id, None)
        if not channels:
            self.groups.pop(group, None)

    def drop_connection(self, connection) -> None:
        for group, channels in list(self.groups.items()):
            for client_id, channel in list(channels.items()):
                if channel.connection is connection:
                    del channels[client_id]
            if not channels:
                del self.groups[group]

    def any_channel(self, group: str) -> ClientChannel | None:
        channels = self.groups.get(group)
        return next(iter(channels.values()), None) if channels else None
