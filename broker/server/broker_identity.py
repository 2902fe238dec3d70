"""The brokerId a controller gave this broker, kept in its store (RocketMQ 5.1's BrokerMetadata
and TempBrokerMetadata: ``brokerIdentity`` and ``brokerIdentity-temp`` beside the commit log).

Getting an id takes two requests (CONTROLLER_GET_NEXT_BROKER_ID, then CONTROLLER_APPLY_BROKER_ID
with a registerCheckCode ``address;timestamp``), and the broker may die between them. So the id
asked for and its check code go to the temp file first: a broker restarted after a crash applies
for the same id with the same code, which the controller accepts as the same broker retrying.
Once applied, the id moves to the identity file and the temp file goes; every later start reuses
that id without asking again.

Formats as RocketMQ's: ``cluster#brokerName#brokerId`` and, in the temp file, ``#checkCode`` after
them. A file naming another cluster or brokerName than broker.conf stops the registration with
that said: the store belongs to another broker set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.common.atomic_file import replace_atomically

_MAX_FILE_BYTES = 4096


class IdentityFileError(ValueError):
    """An identity file that cannot be used: unreadable, or another broker set's."""


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str = ""  # the temp file's only

    def encode(self) -> str:
        text = f"{self.cluster_name}#{self.broker_name}#{self.broker_id}"
        return f"{text}#{self.register_check_code}" if self.register_check_code else text

    @classmethod
    def decode(cls, text: str, path: Path) -> BrokerIdentity:
        parts = text.strip().split("#", 3)
        if len(parts) < 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
            raise IdentityFileError(f"{path} is not cluster#brokerName#brokerId: {text[:200]!r}")
        return cls(parts[0], parts[1], int(parts[2]), parts[3] if len(parts) > 3 else "")


class IdentityFiles:
    """The two files of one store."""

    def __init__(self, path: Path, cluster_name: str, broker_name: str) -> None:
        self.path = path
        self.temp_path = path.with_name(path.name + "-temp")
        self.cluster_name, self.broker_name = cluster_name, broker_name

    def applied(self) -> BrokerIdentity | None:
        """The identity file's, once an id was applied for (None before)."""
        return self._read(self.path)

    def pending(self) -> BrokerIdentity | None:
        """The temp file's: an id asked for, perhaps not yet applied."""
        return self._read(self.temp_path)

    def note_pending(self, broker_id: int, check_code: str) -> BrokerIdentity:
        identity = BrokerIdentity(self.cluster_name, self.broker_name, broker_id, check_code)
        _write(self.temp_path, identity.encode())
        return identity

    def drop_pending(self) -> None:
        self.temp_path.unlink(missing_ok=True)

    def confirm(self, broker_id: int) -> BrokerIdentity:
        """The id was applied: keep it for good and forget the temp file."""
        identity = BrokerIdentity(self.cluster_name, self.broker_name, broker_id)
        _write(self.path, identity.encode())
        self.drop_pending()
        return identity

    def _read(self, path: Path) -> BrokerIdentity | None:
        try:
            with open(path, "rb") as handle:
                raw = handle.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise IdentityFileError(f"{path} cannot be read: {exc}") from None
        if not raw.strip():
            return None  # an empty file (a crash while creating it): as if absent
        if len(raw) > _MAX_FILE_BYTES:
            raise IdentityFileError(f"{path} is larger than {_MAX_FILE_BYTES} bytes: not an identity file")
        identity = BrokerIdentity.decode(raw.decode("utf-8", "replace"), path)
        if (identity.cluster_name, identity.broker_name) != (self.cluster_name, self.broker_name):
            raise IdentityFileError(
                f"{path} belongs to cluster {identity.cluster_name!r} brokerName {identity.broker_name!r}, "
                f"but broker.conf says {self.cluster_name!r} {self.broker_name!r}: this store is another "
                "broker set's (fix broker.conf or storePathRootDir)"
            )
        return identity


def _write(path: Path, text: str) -> None:
    replace_atomically(path, text.encode())
