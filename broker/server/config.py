"""Broker settings from ``broker.conf`` (RocketMQ's key names) and command-line overrides.

Which keys exist, their types, ranges and how a change applies are in ``config_schema``; the
defaults are the dataclass defaults here and in ``MessageStoreConfig``.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.acl.replay import SignedRequestPolicy
from broker.common import connection_limits as net
from broker.common.broker_config_keys import JAVA_INT_MAX, SECRET_KEYS, SECRET_MASK
from broker.common.conf_file import ConfError, load_conf
from broker.common.tls_modes import ClientAuth, TlsMode
from broker.remoting.tls import ClientTls, ServerTls
from broker.store.ha.roles import role_problem
from broker.store.store_config import MessageStoreConfig

from . import config_schema as schema

log = logging.getLogger(__name__)


@dataclass
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=socket.gethostname)
    broker_id: int = 0
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    namesrv_addrs: list[str] = field(default_factory=list)
    store_path_root_dir: str = field(default_factory=lambda: str(Path.home() / "store"))
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 4
    # Most read or write queues one topic may be created with (not a RocketMQ key): every queue
    # is a line of each stats answer and a directory, so 2M queues made one request take seconds.
    max_topic_queue_nums: int = 1024
    # Most topics and groups this broker keeps (not RocketMQ keys): senders auto-create topics and
    # consumers auto-create groups, and every list answer, registration and persisted table grows
    # with them. Retry/DLQ topics follow their groups and are not counted.
    max_topic_count: int = 20_000
    max_subscription_group_count: int = 20_000
    broker_permission: int = 6
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    register_broker_interval_millis: int = 30_000
    # RocketMQ's default is false; here true: the compressed body needs no JSON encoder. At 20,000
    # groups (40,000 topics): ~0.1 s and 100 KB to build and send, against seconds and 6.5 MB.
    compressed_register: bool = True
    client_channel_max_idle_millis: int = 120_000
    flush_consumer_offset_interval: int = 5000
    enable_property_filter: bool = False
    # A new group starts at offset 0 only while the queue's first message is within this share (%)
    # of physical memory behind the commit log's end (RocketMQ's MessageStoreConfig key).
    access_message_in_memory_max_ratio: int = 40
    # A master suggests a slave to consumers reading further behind than that (RocketMQ's
    # slaveReadEnable: the pull answer's suggestWhichBrokerId; broker/server/replication.py).
    slave_read_enable: bool = False
    # Delay, retry and transaction services (RocketMQ's defaults; tests shorten them).
    flush_delay_offset_interval: int = 10_000
    transaction_timeout: int = 6000
    transaction_check_interval: int = 60_000
    transaction_check_max: int = 15
    # How long an orderly consumer's queue lock lives without renewal (RocketMQ: 60 s).
    rebalance_lock_max_live_time: int = 60_000
    store_reply_message_enable: bool = True
    # Create the trace topic at start-up (RocketMQ's traceTopicEnable); the broker then also
    # traces the retries and dead-lettering it performs.
    trace_topic_enable: bool = False
    # Keep polling for this long after a read instead of sleeping (broker/remoting/busy_poll.py):
    # waking a sleeping broker costs more than serving a message. 0 turns it off.
    busy_poll_window_micros: int = 250
    # Network limits of the remoting port (broker/common/connection_limits.py: the same keys in namesrv.conf).
    frame_max_length: int = net.DEFAULT_FRAME_MAX_LENGTH
    server_max_partial_frame_bytes: int = net.DEFAULT_MAX_PARTIAL_FRAME_BYTES
    server_channel_max_idle_time_seconds: int = net.DEFAULT_CHANNEL_MAX_IDLE_S
    server_max_connections: int = net.DEFAULT_MAX_CONNECTIONS
    server_max_connections_per_address: int = net.DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    # Plain ACL (broker/acl): off by default; the file defaults to
    # $ROCKETMQ_HOME/conf/plain_acl.yml (Apache's), else <storePathRootDir>/config/plain_acl.yml
    # (acl_path); the inner keys sign the broker's own requests to
    # the name servers (an admin account there when the name servers have ACL on).
    acl_enable: bool = False
    acl_file_path: str = ""
    acl_reload_interval_millis: int = 1000
    inner_access_key: str = ""
    inner_secret_key: str = ""
    # Signed requests (broker/acl/replay.py): replays refused, TLS required; off by default
    # because Apache's clients can meet neither.
    acl_replay_protection: bool = False
    acl_replay_window_seconds: int = 120
    acl_require_tls: bool = False
    acl_replay_future_skew_seconds: int = 15
    acl_replay_nonces_per_account: int = 100_000
    # The HA port's sign-in without ACL (broker/store/ha/auth.py): slaves sign with this secret.
    ha_auth_secret: str = field(default="", repr=False)
    # TLS (broker/remoting/tls.py): the remoting port's (disabled: plaintext only, as without
    # TLS), and the broker's own connections to the name servers.
    tls_server_mode: str = TlsMode.DISABLED.value
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    tls_server_key_password: str = field(default="", repr=False)
    tls_server_need_client_auth: str = ClientAuth.NONE.value
    tls_server_trust_cert_path: str = ""
    tls_enable: str = ""  # "": TLS to the name servers when the port is enforcing (RocketMQ's default)
    tls_test_mode_enable: bool = False
    tls_client_trust_cert_path: str = ""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = field(default="", repr=False)
    # Controller mode (RocketMQ 5's automatic failover; broker/server/replicas_manager.py): the
    # controllers decide which broker of the set is master; brokerRole and brokerId then do not.
    enable_controller_mode: bool = False
    controller_addrs: list[str] = field(default_factory=list)
    sync_broker_metadata_period: int = 5000  # CONTROLLER_GET_REPLICA_INFO every
    check_sync_state_set_period: int = 5000  # a master's in-sync set checked every
    sync_controller_metadata_period: int = 10_000  # which controller leads, looked up every
    controller_heart_beat_timeout_mills: int = 10_000  # the controller's verdict "dead" after
    broker_heartbeat_interval: int = 1000  # BROKER_HEARTBEAT to every controller every
    broker_election_priority: int = JAVA_INT_MAX  # lower is elected first
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    conf_path: Path | None = None

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @classmethod
    def load(cls, conf_path: str | None, overrides: dict | None = None) -> BrokerConfig:
        raw = load_conf(conf_path, overrides)
        return cls.from_properties(raw, Path(conf_path) if conf_path else None)

    @classmethod
    def from_properties(cls, raw: dict[str, str], conf_path: Path | None = None) -> BrokerConfig:
        """Settings from RocketMQ's keys; a bad value raises ``ConfigValueError`` naming it.
        Unknown keys are ignored with a warning, as RocketMQ ignores them."""
        values, unknown = schema.parse_known(raw)
        if unknown:
            log.warning("broker.conf: ignoring unknown keys %s", ", ".join(sorted(unknown)))
        config = cls(
            **{key.attr: value for key, value in values.items() if key.owner == schema.BROKER},
            conf_path=conf_path,
        )
        store_values = {key.attr: value for key, value in values.items() if key.owner == schema.STORE}
        config.store = MessageStoreConfig(
            **store_values, store_path_root_dir=config.store_path_root_dir, store_host=config.broker_addr
        )
        if config.enable_controller_mode:
            config._check_controller_mode()
            return config
        problem = role_problem(config.store.broker_role, config.broker_id)
        if problem:  # as RocketMQ's BrokerStartup: the broker does not start
            raise ConfError(problem)
        return config

    def _check_controller_mode(self) -> None:
        """Controller mode's own checks; brokerRole and brokerId are not checked (the controller
        decides both), but said to be ignored."""
        if not self.controller_addrs:
            raise ConfError("enableControllerMode=true needs controllerAddr (host:port;host:port)")
        if self.controller_heart_beat_timeout_mills < 3 * self.broker_heartbeat_interval:
            # The master's lease (replicas_manager.py) is 2/3 of the timeout and must outlast
            # at least one missed heartbeat, or a healthy master would keep fencing itself.
            raise ConfError(
                f"controllerHeartBeatTimeoutMills={self.controller_heart_beat_timeout_mills} must be at "
                f"least 3 x brokerHeartbeatInterval ({self.broker_heartbeat_interval})"
            )
        log.info(
            "enableControllerMode=true: brokerRole=%s and brokerId=%d of broker.conf do not decide this "
            "broker's role; the controllers %s do (its brokerId comes from them and is kept in %s)",
            self.store.broker_role,
            self.broker_id,
            ";".join(self.controller_addrs),
            self.broker_identity_path,
        )

    @property
    def broker_identity_path(self) -> Path:
        """Where the controller-assigned brokerId is kept (RocketMQ's storePathBrokerIdentity)."""
        return Path(self.store_path_root_dir) / "brokerIdentity"

    @property
    def epoch_file_path(self) -> Path:
        """The commit log's epochs (RocketMQ's storePathEpochFile)."""
        return Path(self.store_path_root_dir) / "epochFileCheckpoint"

    @property
    def ha_listen_port(self) -> int:
        """The replication port: ``haListenPort``, or listenPort + 1 when it is 0 (a port of the
        system's choosing when listenPort is 0 too; the broker notes the one it got)."""
        if self.store.ha_listen_port or not self.listen_port:
            return self.store.ha_listen_port
        return self.listen_port + 1

    @property
    def ha_server_addr(self) -> str:
        """Where slaves reach this broker's HA port (RocketMQ registers brokerIP2:haListenPort)."""
        return f"{self.broker_ip1}:{self.ha_listen_port}"

    def store_config(self) -> MessageStoreConfig:
        """The store's settings: the very object the store reads, so live changes reach it."""
        return self.store

    def server_tls(self) -> ServerTls:
        return ServerTls(
            TlsMode(self.tls_server_mode),
            self.tls_server_cert_path,
            self.tls_server_key_path,
            self.tls_server_key_password,
            ClientAuth(self.tls_server_need_client_auth),
            self.tls_server_trust_cert_path,
        )

    def client_tls(self) -> ClientTls:
        """How the broker connects to the name servers."""
        # Unset: TLS when the broker's own port is TLS-only (RocketMQ's default for its clients).
        enable = self.tls_enable == "true" if self.tls_enable else self.tls_server_mode == TlsMode.ENFORCING
        return ClientTls(
            enable,
            self.tls_test_mode_enable,
            self.tls_client_trust_cert_path,
            self.tls_client_cert_path,
            self.tls_client_key_path,
            self.tls_client_key_password,
        )

    def connection_limits(self) -> net.ConnectionLimits:
        return net.ConnectionLimits(
            self.frame_max_length,
            self.server_max_partial_frame_bytes,
            self.server_channel_max_idle_time_seconds,
            self.server_max_connections,
            self.server_max_connections_per_address,
        )

    def holder_of(self, key: schema.ConfigKey) -> Any:
        return self.store if key.owner == schema.STORE else self

    def value_of(self, key: schema.ConfigKey) -> str:
        return key.format(getattr(self.holder_of(key), key.attr))

    def as_properties(self) -> dict[str, str]:
        """Every known setting under its RocketMQ name, as the running broker uses it
        (GET_BROKER_CONFIG)."""
        return {
            name: SECRET_MASK if name in SECRET_KEYS and self.value_of(key) else self.value_of(key)
            for name, key in sorted(schema.KEYS.items())
        }

    def signed_request_policy(self) -> SignedRequestPolicy:
        """The replay and TLS settings of signed requests; ``AclConfigError`` (a ConfError) when
        they would protect nothing or refuse every signed request."""
        policy = SignedRequestPolicy(
            self.acl_replay_protection,
            self.acl_replay_window_seconds,
            self.acl_require_tls,
            self.acl_replay_future_skew_seconds,
            self.acl_replay_nonces_per_account,
        )
        return policy.checked(self.acl_enable, self.tls_server_mode)

    def acl_path(self) -> Path:
        """The plain_acl.yml in use: ``aclFilePath``; else the store's config directory's when it
        exists (a broker that had one keeps it, even where an Apache install sets ROCKETMQ_HOME:
        its sample file's well-known keys must never replace the broker's own accounts); else
        Apache's default place, ``$ROCKETMQ_HOME/conf/plain_acl.yml``, so an Apache broker.conf
        moves as it is; else the store's (a missing file is then the start-up error)."""
        if self.acl_file_path:
            return Path(self.acl_file_path)
        own = Path(self.store_path_root_dir) / "config" / "plain_acl.yml"
        # Apache's rocketmq.acl.plain.file (a JVM system property) has no counterpart here.
        home = os.environ.get("ROCKETMQ_HOME")
        if home and not own.exists():
            return Path(home) / "conf" / "plain_acl.yml"
        return own
