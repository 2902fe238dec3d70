"""Every ``broker.conf`` key the broker knows, in one table: its type and range, where its value
lives, and what happens when it is changed on a running broker.

The table is protocol vocabulary shared by the broker (``broker/server/config_schema.py`` checks
``broker.conf`` at start and UPDATE_BROKER_CONFIG requests with it, and builds the
GET_BROKER_CONFIG answer) and the console's broker-config page, so a value refused in one place
is refused everywhere and no key can be reported as changed while the running broker keeps the
old value. It imports nothing from the store: the broker adds the store's own check of
``archiveUri`` (``ArchiveUri.check``) to its copy of the table.

Each key says how a change applies (``Apply``):

- ``LIVE``: the running broker or store reads it at once (the controller copies the value onto
  the object that uses it and runs the key's hook, if any).
- ``RESTART``: accepted and written to ``broker.conf``, reported as pending until the broker is
  restarted (the answer and the console say so).
- ``FIXED``: the broker's identity and places (names, ports, paths): set in ``broker.conf`` only,
  refused at run time.

To add a key: one ``ConfigKey`` line in ``KEYS`` naming the attribute that holds its value on
``BrokerConfig`` (``owner=BROKER``) or ``MessageStoreConfig`` (``owner=STORE``), with that
attribute's default in the dataclass.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.common import connection_limits as net
from broker.common.conf_file import ConfError, parse_hours
from broker.common.delay_levels import parse_delay_levels
from broker.common.hosts import parse_host_list
from broker.common.tls_modes import CLIENT_AUTH_MODES, TLS_MODES

BROKER, STORE = "broker", "store"
JAVA_INT_MAX = 2**31 - 1
_MAX_TEXT = 1024


class Apply(enum.Enum):
    LIVE = "live"
    RESTART = "restart"
    FIXED = "fixed"


class ConfigValueError(ConfError):
    """A value a key cannot take; the message names the key and the value."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        super().__init__(f"{key}={value!r} is not valid: {reason}")
        self.key, self.value, self.reason = key, value, reason


class FixedConfigKeyError(ConfError):
    """A key that only ``broker.conf`` sets (the broker's identity and places)."""


class UnknownConfigKeyError(ConfError):
    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = sorted(keys)
        super().__init__(
            f"unknown broker config key{'s' if len(self.keys) > 1 else ''}: {', '.join(self.keys)}"
        )


# -- value types: parse(text) -> value or raise ValueError(reason); format(value) -> text ----------
@dataclass(frozen=True)
class Int:
    minimum: int = 0
    maximum: int = JAVA_INT_MAX

    def parse(self, text: str) -> int:
        if not re.fullmatch(r"[+-]?\d{1,19}", text):
            raise ValueError("not a whole number")
        value = int(text)
        if not self.minimum <= value <= self.maximum:
            raise ValueError(f"must be between {self.minimum} and {self.maximum}")
        return value

    def format(self, value: int) -> str:
        return str(value)

    def describe(self) -> str:
        return f"whole number {self.minimum} to {self.maximum}"


@dataclass(frozen=True)
class OneOf:
    """An int or text from a fixed set."""

    choices: tuple
    meaning: str = ""

    def parse(self, text: str):
        for choice in self.choices:
            if text == str(choice):
                return choice
        raise ValueError(f"must be one of {', '.join(map(str, self.choices))}{self.meaning}")

    def format(self, value) -> str:
        return str(value)

    def describe(self) -> str:
        return f"one of {', '.join(map(str, self.choices))}{self.meaning}"


@dataclass(frozen=True)
class Bool:
    def parse(self, text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise ValueError("must be true or false")
        return text.lower() == "true"

    def format(self, value: bool) -> str:
        return "true" if value else "false"

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Text:
    pattern: str = r"[^\x00-\x1f]+"
    meaning: str = "one line of text"

    def parse(self, text: str) -> str:
        if len(text) > _MAX_TEXT or not re.fullmatch(self.pattern, text):
            raise ValueError(f"must be {self.meaning}")
        return text

    def format(self, value: str) -> str:
        return value

    def describe(self) -> str:
        return self.meaning


@dataclass(frozen=True)
class IpAddress:
    """An IPv4 or IPv6 address, not a host name: the store writes it into every message's store
    host (4 or 16 bytes), as RocketMQ's brokerIP1 must be."""

    def parse(self, text: str) -> str:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            raise ValueError("must be an IPv4 or IPv6 address (not a host name)") from None
        return text

    def format(self, value: str) -> str:
        return value

    def describe(self) -> str:
        return "an IPv4 or IPv6 address"


@dataclass(frozen=True)
class AddrList:
    """``host:port;host:port`` (namesrvAddr)."""

    def parse(self, text: str) -> list[str]:
        return parse_host_list(text, "host:port list")

    def format(self, value: list[str]) -> str:
        return ";".join(value)

    def describe(self) -> str:
        return "host:port, several separated by ;"


@dataclass(frozen=True)
class Hours:
    """``deleteWhen``: hours of the day, ``04`` or ``04;16``."""

    def parse(self, text: str) -> str:
        parse_hours(text)  # the value stays text: the store reads it with the same parse_hours
        return text

    def format(self, value: str) -> str:
        return value

    def describe(self) -> str:
        return "hours 0-23 separated by ;"


@dataclass(frozen=True)
class DelayLevels:
    """``messageDelayLevel``: ``1s 5s 10s 30s 1m … 2h``."""

    def parse(self, text: str) -> str:
        parse_delay_levels(text)  # the store's own grammar: what it would refuse is refused here
        return " ".join(text.split())

    def format(self, value: str) -> str:
        return value

    def describe(self) -> str:
        return "delays like 1s 5s 10s 30s 1m … 2h, separated by spaces"


@dataclass(frozen=True)
class ArchiveUri:
    """``archiveUri``: where sealed segments are copied; empty for none. ``check`` is the store's
    own reading of the URI (raising ValueError saying what it supports): the broker's table sets
    it, so a URI the archiver cannot use stops the broker at start, not later."""

    check: Callable[[str], object] | None = None

    def parse(self, text: str) -> str | None:
        if not text:
            return None
        if len(text) > _MAX_TEXT or not re.fullmatch(r"[^\x00-\x1f]+", text):
            raise ValueError("must be a directory or file:// URI on one line")
        if self.check is not None:
            self.check(text)
        return text

    def format(self, value: str | None) -> str:
        return value or ""

    def describe(self) -> str:
        return "a directory or file:// URI (empty: no archive)"


@dataclass(frozen=True)
class ConfigKey:
    name: str  # RocketMQ's key, as written in broker.conf
    attr: str  # the attribute holding its value on BrokerConfig or MessageStoreConfig
    owner: str  # BROKER or STORE
    kind: Any  # one of the value types above
    apply: Apply
    help: str = ""

    def parse(self, text: str):
        text = text.strip()
        try:
            return self.kind.parse(text)
        except ValueError as exc:
            raise ConfigValueError(self.name, text, str(exc)) from None

    def format(self, value) -> str:
        return self.kind.format(value)


def _key(name: str, owner: str, kind, apply: Apply, help: str = "") -> ConfigKey:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name.replace(".", "_")).lower()  # tls.server.certPath too
    return ConfigKey(name, _ATTR_NAMES.get(name, snake), owner, kind, apply, help)


# Keys whose attribute is not simply the snake_case of the key.
_ATTR_NAMES = {
    "brokerIP1": "broker_ip1",
    "clientChannelMaxIdleTimeMillis": "client_channel_max_idle_millis",
    "namesrvAddr": "namesrv_addrs",
    "controllerAddr": "controller_addrs",
    "transactionTimeOut": "transaction_timeout",
}
_NAME = Text(r"[A-Za-z0-9_%|-]{1,127}", "1-127 letters, digits, _, -, % or |")
_PATH = Text(r"[^\x00-\x1f;]{1,1024}", "a path")
_OPTIONAL_PATH = Text(r"[^\x00-\x1f;]{0,1024}", "a path, or empty for none")
_PASSWORD = Text(r"[^\x00-\x1f]{0,1024}", "one line of text, or empty for none")
_KEY = Text(r"[\x21-\x7e]{0,256}", "up to 256 printable characters without spaces")
LIVE, RESTART, FIXED = Apply.LIVE, Apply.RESTART, Apply.FIXED
# RocketMQ's BrokerRole; a slave has brokerId > 0 and its master's brokerName.
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
_OPTIONAL_HOST_PORT = Text(r"([A-Za-z0-9.\[\]_:-]{1,255}:[0-9]{1,5})?", "host:port, or empty for none")
# Keys whose value is a secret: GET_BROKER_CONFIG (and so the console) shows a mask instead.
SECRET_KEYS = frozenset(
    {"innerSecretKey", "haAuthSecret", "tls.server.keyPassword", "tls.client.keyPassword"}
)
# A shared secret guessed in fewer tries than a 16-character one is no secret.
_SHARED_SECRET = Text(r"([^\x00-\x1f]{16,1024})?", "at least 16 characters on one line, or empty for none")
SECRET_MASK = "******"
_MS = "milliseconds"

KEYS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        # identity and places: broker.conf only
        _key("brokerClusterName", BROKER, _NAME, FIXED, "cluster this broker belongs to"),
        _key("brokerName", BROKER, _NAME, FIXED, "name of the master/slave set"),
        # -1: controller mode, the id comes from the controller (RocketMQ 5's quick-start files say so);
        # outside it, roles.py refuses any id that does not fit brokerRole.
        _key("brokerId", BROKER, Int(-1, 1024), FIXED, "0 for the master"),
        _key("brokerIP1", BROKER, IpAddress(), FIXED, "address registered with the name servers"),
        _key("listenPort", BROKER, Int(0, 65535), FIXED, "remoting port"),
        _key("storePathRootDir", BROKER, _PATH, FIXED, "store directory"),
        _key("namesrvAddr", BROKER, AddrList(), RESTART, "name servers to register with"),
        # broker behaviour
        _key("autoCreateTopicEnable", BROKER, Bool(), LIVE, "create unknown topics on first send"),
        _key("autoCreateSubscriptionGroup", BROKER, Bool(), LIVE, "create unknown groups on first use"),
        _key("defaultTopicQueueNums", BROKER, Int(1, 1024), LIVE, "queues of auto-created topics"),
        _key("maxTopicQueueNums", BROKER, Int(1, 65536), LIVE, "most read or write queues a topic may have"),
        _key("maxTopicCount", BROKER, Int(1), LIVE, "most topics clients may create on this broker"),
        _key("maxSubscriptionGroupCount", BROKER, Int(1), LIVE, "most subscription groups on this broker"),
        _key("brokerPermission", BROKER, OneOf((2, 4, 6), " (2 write, 4 read, 6 both)"), LIVE),
        _key("longPollingEnable", BROKER, Bool(), LIVE, "hold pulls until a message arrives"),
        _key("shortPollingTimeMills", BROKER, Int(0, 60_000), LIVE, f"pull hold without long polling, {_MS}"),
        _key("registerBrokerIntervalMillis", BROKER, Int(100, 60_000), LIVE, f"name-server heartbeat, {_MS}"),
        _key("compressedRegister", BROKER, Bool(), LIVE, "send registrations zlib-compressed"),
        _key("clientChannelMaxIdleTimeMillis", BROKER, Int(1000), LIVE, f"drop silent clients after, {_MS}"),
        _key(
            "flushConsumerOffsetInterval", BROKER, Int(1), RESTART, f"consumer offsets persisted every, {_MS}"
        ),
        _key("enablePropertyFilter", BROKER, Bool(), LIVE, "allow SQL92 subscriptions"),
        _key(
            "accessMessageInMemoryMaxRatio",
            BROKER,
            Int(0, 100),
            LIVE,
            "% of memory a new group may start behind",
        ),
        _key("slaveReadEnable", BROKER, Bool(), LIVE, "send consumers far behind to a slave"),
        _key("flushDelayOffsetInterval", BROKER, Int(1), RESTART, f"delay progress persisted every, {_MS}"),
        _key("transactionTimeOut", BROKER, Int(0), LIVE, f"age before a half message is checked, {_MS}"),
        _key("transactionCheckInterval", BROKER, Int(1), LIVE, f"transaction checks every, {_MS}"),
        _key("transactionCheckMax", BROKER, Int(1, 1000), LIVE, "checks before a half message is given up"),
        _key("rebalanceLockMaxLiveTime", BROKER, Int(1), RESTART, f"queue lock life, {_MS}"),
        _key("storeReplyMessageEnable", BROKER, Bool(), LIVE, "store replies as well as pushing them"),
        _key("traceTopicEnable", BROKER, Bool(), RESTART, "create the trace topic at start"),
        _key("busyPollWindowMicros", BROKER, Int(0, 1_000_000), RESTART, "poll sockets after a read, µs"),
        # network limits of the remoting port (broker/common/connection_limits.py; namesrv.conf has the same)
        _key(
            net.FRAME_MAX_LENGTH_KEY,
            BROKER,
            Int(net.MIN_FRAME_MAX_LENGTH, net.MAX_FRAME_MAX_LENGTH),
            RESTART,
            "longest frame, bytes (RocketMQ's frameMaxLength)",
        ),
        _key(
            net.MAX_PARTIAL_FRAME_BYTES_KEY,
            BROKER,
            Int(net.MIN_FRAME_MAX_LENGTH, 1 << 40),
            RESTART,
            "unfinished frames of all connections, bytes",
        ),
        _key(
            net.CHANNEL_MAX_IDLE_KEY, BROKER, Int(0), RESTART, "close silent connections after, s (0: never)"
        ),
        _key(
            net.MAX_CONNECTIONS_KEY, BROKER, Int(1, net.MAX_MAX_CONNECTIONS), RESTART, "connections at most"
        ),
        _key(
            net.MAX_CONNECTIONS_PER_ADDRESS_KEY,
            BROKER,
            Int(1, net.MAX_MAX_CONNECTIONS),
            RESTART,
            "connections from one client address at most",
        ),
        # plain ACL (broker/acl): RocketMQ's aclEnable; the rest are this broker's keys
        _key("aclEnable", BROKER, Bool(), RESTART, "check every request against plain_acl.yml"),
        _key(
            "aclFilePath",
            BROKER,
            _OPTIONAL_PATH,
            FIXED,
            "plain_acl.yml (default: $ROCKETMQ_HOME/conf/, else <storePathRootDir>/config/)",
        ),
        _key(
            "aclReloadIntervalMillis", BROKER, Int(100, 3_600_000), RESTART, f"ACL file checked every, {_MS}"
        ),
        # broker.conf only, as TLS: no request can turn them off
        _key("aclReplayProtection", BROKER, Bool(), FIXED, "refuse signed requests that may be replays"),
        _key("aclReplayWindowSeconds", BROKER, Int(5, 3600), FIXED, "signed requests' timestamps within, s"),
        _key("aclRequireTls", BROKER, Bool(), FIXED, "refuse signed requests over plaintext"),
        _key("aclReplayFutureSkewSeconds", BROKER, Int(1, 3600), FIXED, "signed timestamps ahead at most, s"),
        _key("aclReplayNoncesPerAccount", BROKER, Int(1000, 10_000_000), FIXED, "nonces kept per account"),
        _key("innerAccessKey", BROKER, _KEY, RESTART, "account signing the broker's name-server requests"),
        _key("innerSecretKey", BROKER, _KEY, RESTART, "its secret key (never shown)"),
        # the HA port's sign-in without ACL (broker/store/ha/auth.py): the same on master and slaves
        _key("haAuthSecret", BROKER, _SHARED_SECRET, RESTART, "secret slaves sign in with (never shown)"),
        # TLS on the remoting port and to the name servers (broker/remoting/tls.py): RocketMQ's
        # names; broker.conf only, so no request can turn TLS off or point it at other files
        _key("tls.server.mode", BROKER, OneOf(TLS_MODES), FIXED, "plaintext, TLS or both on the port"),
        _key("tls.server.certPath", BROKER, _OPTIONAL_PATH, FIXED, "the port's certificate (PEM)"),
        _key("tls.server.keyPath", BROKER, _OPTIONAL_PATH, FIXED, "its private key (PEM)"),
        _key("tls.server.keyPassword", BROKER, _PASSWORD, FIXED, "the key's password (never shown)"),
        _key("tls.server.need.client.auth", BROKER, OneOf(CLIENT_AUTH_MODES), FIXED, "ask for client certs"),
        _key("tls.server.trustCertPath", BROKER, _OPTIONAL_PATH, FIXED, "CAs of client certificates (PEM)"),
        _key(
            "tls.enable",
            BROKER,
            OneOf(("true", "false", ""), " (empty: true when tls.server.mode is enforcing)"),
            FIXED,
            "TLS to the name servers",
        ),
        _key("tls.test.mode.enable", BROKER, Bool(), FIXED, "TLS to the name servers without verifying them"),
        _key("tls.client.trustCertPath", BROKER, _OPTIONAL_PATH, FIXED, "CAs of name-server certificates"),
        _key("tls.client.certPath", BROKER, _OPTIONAL_PATH, FIXED, "the broker's client certificate (PEM)"),
        _key("tls.client.keyPath", BROKER, _OPTIONAL_PATH, FIXED, "its private key (PEM)"),
        _key("tls.client.keyPassword", BROKER, _PASSWORD, FIXED, "the key's password (never shown)"),
        # the store
        _key("flushDiskType", STORE, OneOf(("ASYNC_FLUSH", "SYNC_FLUSH")), RESTART),
        _key("mappedFileSizeCommitLog", STORE, Int(4096, 1 << 40), RESTART, "commit-log segment bytes"),
        _key("mappedFileSizeConsumeQueue", STORE, Int(20, 1 << 31), RESTART, "consume-queue file bytes"),
        _key("maxMessageSize", STORE, Int(1, JAVA_INT_MAX), LIVE, "largest message or batch, bytes"),
        _key("maxPropertiesSize", STORE, Int(1, 32768), RESTART, "largest properties string, bytes"),
        _key("flushIntervalCommitLog", STORE, Int(1), RESTART, f"async flush every, {_MS}"),
        _key("flushIntervalConsumeQueue", STORE, Int(1), RESTART, f"queue flush every, {_MS}"),
        _key("syncFlushTimeout", STORE, Int(1), RESTART, f"sync flush wait, {_MS}"),
        _key("flushCheckpointInterval", STORE, Int(1), RESTART, f"checkpoint every, {_MS}"),
        _key("fileReservedTime", STORE, Int(0, 100_000), LIVE, "hours a sealed segment is kept"),
        _key("deleteWhen", STORE, Hours(), LIVE, "hours when expired segments are deleted"),
        _key("diskMaxUsedSpaceRatio", STORE, Int(10, 95), LIVE, "% disk use that deletes at once"),
        _key("diskSpaceWarningLevelRatio", STORE, Int(35, 90), LIVE, "% disk use that refuses writes"),
        _key("cleanFileForciblyEnable", STORE, Bool(), LIVE, "a full disk deletes unexpired segments too"),
        _key("cleanResourceInterval", STORE, Int(10, 3_600_000), LIVE, f"retention pass every, {_MS}"),
        _key("deleteFilesBatchMax", STORE, Int(1, 1000), LIVE, "segments deleted per pass at most"),
        _key("archiveUri", STORE, ArchiveUri(), RESTART, "copy sealed segments here (analytics input)"),
        _key("messageIndexEnable", STORE, Bool(), LIVE, "index keys and message ids"),
        _key("maxHashSlotNum", STORE, Int(1, 50_000_000), RESTART, "index hash slots"),
        _key("maxIndexNum", STORE, Int(1, 200_000_000), RESTART, "index entries per file"),
        _key("maxTransferBytesOnMessageInMemory", STORE, Int(1), LIVE, "bytes one pull returns at most"),
        _key("maxTransferCountOnMessageInMemory", STORE, Int(1), LIVE, "messages one pull returns at most"),
        _key("maxFilterMessageCount", STORE, Int(1), LIVE, "entries a filtered pull scans at most"),
        # high availability (broker/store/ha): RocketMQ's MessageStoreConfig keys and defaults
        _key("brokerRole", STORE, OneOf(BROKER_ROLES), FIXED, "ASYNC_MASTER, SYNC_MASTER or SLAVE"),
        _key("haListenPort", STORE, Int(0, 65535), FIXED, "replication port (0: listenPort + 1)"),
        _key(
            "haMasterAddress",
            STORE,
            _OPTIONAL_HOST_PORT,
            RESTART,
            "a slave's master HA host:port (empty: from the name server)",
        ),
        _key(
            "haTransferBatchSize",
            STORE,
            Int(1024, 4 << 20),
            LIVE,
            "bytes a master sends a slave per frame at most",
        ),
        _key(
            "haSendHeartbeatInterval", STORE, Int(100, 3_600_000), LIVE, f"replication heartbeat every, {_MS}"
        ),
        _key(
            "haHousekeepingInterval",
            STORE,
            Int(200, 3_600_000),
            LIVE,
            f"drop a silent replication peer after, {_MS}",
        ),
        _key("slaveTimeout", STORE, Int(1, 3_600_000), LIVE, f"SYNC_MASTER wait for a slave, {_MS}"),
        _key(
            "haMaxGapNotInSync", STORE, Int(0), LIVE, "bytes a slave may lag before SYNC_MASTER sends skip it"
        ),
        # controller mode (RocketMQ 5's automatic failover; broker/server/replicas_manager.py):
        # BrokerConfig's and MessageStoreConfig's keys and defaults
        _key("enableControllerMode", BROKER, Bool(), FIXED, "the controller decides master and slaves"),
        _key("controllerAddr", BROKER, AddrList(), RESTART, "controllers, host:port;host:port"),
        _key(
            "syncBrokerMetadataPeriod", BROKER, Int(100, 3_600_000), LIVE, f"replica info polled every, {_MS}"
        ),
        _key(
            "checkSyncStateSetPeriod", BROKER, Int(100, 3_600_000), LIVE, f"in-sync set checked every, {_MS}"
        ),
        _key(
            "syncControllerMetadataPeriod",
            BROKER,
            Int(100, 3_600_000),
            LIVE,
            f"controller leader looked up every, {_MS}",
        ),
        _key(
            "controllerHeartBeatTimeoutMills",
            BROKER,
            Int(300, 3_600_000),
            RESTART,
            f"the controller takes this broker for dead after, {_MS}",
        ),
        _key(
            "brokerHeartbeatInterval",
            BROKER,
            Int(50, 3_600_000),
            RESTART,
            f"controller heartbeat every, {_MS}",
        ),
        _key("brokerElectionPriority", BROKER, Int(0), LIVE, "lower is elected master first"),
        _key("allAckInSyncStateSet", STORE, Bool(), LIVE, "a send waits for every in-sync replica"),
        _key("inSyncReplicas", STORE, Int(1, 64), LIVE, "replicas (master included) a send waits for"),
        _key(
            "haMaxTimeSlaveNotCatchup",
            STORE,
            Int(100, 3_600_000),
            LIVE,
            f"a slave behind this long leaves the in-sync set, {_MS}",
        ),
        # Parsed into the delay levels when the store and the schedule service start (as RocketMQ
        # does): changing it under messages already waiting would re-time or strand them.
        _key("messageDelayLevel", STORE, DelayLevels(), RESTART, "delay of each level"),
    )
}
