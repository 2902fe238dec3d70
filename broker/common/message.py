"""The message model shared by the store, the broker and the client.

``Message`` is what an application sends; ``MessageExt`` is a stored message with everything the
broker adds. Reserved properties (tags, keys, delay level, unique id…) live in ``properties``
exactly as RocketMQ keeps them, with typed accessors on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import message_const as const

HostPort = tuple[str, int]


@dataclass(slots=True)
class Message:
    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    # -- reserved properties -------------------------------------------------------------
    @property
    def tags(self) -> str | None:
        return self.properties.get(const.PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(const.PROPERTY_TAGS, value)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(const.PROPERTY_KEYS)
        return [k for k in raw.split(const.KEY_SEPARATOR) if k] if raw else []

    @keys.setter
    def keys(self, value: str | list[str] | None) -> None:
        if isinstance(value, list | tuple):
            value = const.KEY_SEPARATOR.join(value)
        self._set(const.PROPERTY_KEYS, value or None)

    @property
    def delay_time_level(self) -> int:
        return int(self.properties.get(const.PROPERTY_DELAY_TIME_LEVEL, 0))

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self._set(const.PROPERTY_DELAY_TIME_LEVEL, str(level) if level else None)

    @property
    def wait_store_msg_ok(self) -> bool:
        return self.properties.get(const.PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, wait: bool) -> None:
        self._set(const.PROPERTY_WAIT_STORE_MSG_OK, None if wait else "false")

    @property
    def unique_key(self) -> str | None:
        """The client-generated message id (UNIQ_KEY), the id applications see."""
        return self.properties.get(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @unique_key.setter
    def unique_key(self, value: str | None) -> None:
        self._set(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, value)

    @property
    def transaction_id(self) -> str | None:
        return self.properties.get(const.PROPERTY_TRANSACTION_ID)

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def put_user_property(self, name: str, value: str) -> None:
        """Set an application property; refuses RocketMQ's reserved names and empty values."""
        if name in const.RESERVED_PROPERTY_NAMES:
            raise ValueError(f"the property name {name!r} is reserved by RocketMQ")
        if not name or not value:
            raise ValueError("user property name and value must not be empty")
        self.properties[name] = value

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


@dataclass(slots=True)
class MessageExt(Message):
    """A message as stored: the broker's additions next to the application's fields."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: HostPort = ("127.0.0.1", 0)
    msg_id: str = ""
    commitlog_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def copy_for_store(self, topic: str, queue_id: int, properties: dict[str, str], **changes) -> MessageExt:
        """A new message to store elsewhere (retry, schedule, commit, dead letter …) carrying this
        one's body, flag, sys flag, born time and host and reconsume times; ``changes`` override."""
        fields = {
            "queue_id": queue_id,
            "sys_flag": self.sys_flag,
            "born_timestamp": self.born_timestamp,
            "born_host": self.born_host,
            "reconsume_times": self.reconsume_times,
            **changes,
        }
        return MessageExt(topic, self.body, self.flag, properties, **fields)

    @property
    def offset_msg_id(self) -> str:
        """The broker-side id: store host + commit-log offset (same as ``msg_id`` here)."""
        return self.msg_id

    @property
    def client_msg_id(self) -> str:
        """The id applications see: UNIQ_KEY when the producer set one, else the offset id."""
        return self.unique_key or self.msg_id
