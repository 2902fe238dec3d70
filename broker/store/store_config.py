"""Settings of one message store, named as RocketMQ's MessageStoreConfig (in snake_case).

Read from ``broker.conf`` through the broker's key table (``broker/server/config_schema.py``),
which also says which of them a running store picks up at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
# RocketMQ's BrokerRole values.
ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"


@dataclass
class MessageStoreConfig:
    store_path_root_dir: str = "store"
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    # 300,000 entries of 20 bytes per consume-queue file.
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_message_size: int = 4 * 1024 * 1024
    max_properties_size: int = 32 * 1024
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500  # ms
    flush_interval_consume_queue: int = 1000  # ms
    sync_flush_timeout: int = 5000  # ms
    flush_checkpoint_interval: int = 1000  # ms
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75  # percent
    # Above it the store refuses writes until space returns (RocketMQ's default and bounds: 90,
    # 35-90). See disk_guard.
    disk_space_warning_level_ratio: int = 90  # percent
    # Whether a disk fuller than disk_max_used_space_ratio deletes the oldest segments even
    # before they expire (RocketMQ's cleanFileForciblyEnable); if not, only expired ones go.
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000  # ms
    delete_files_batch_max: int = 10
    archive_uri: str | None = None
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_filter_message_count: int = 16_000
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    store_host: str = "127.0.0.1:10911"
    # High availability (broker/store/ha), RocketMQ's keys and defaults. haListenPort 0 means the
    # broker's listen port + 1 (RocketMQ's BrokerStartup does the same with a value <= 0).
    broker_role: str = ASYNC_MASTER
    ha_listen_port: int = 0
    ha_master_address: str = ""
    ha_transfer_batch_size: int = 32 * 1024
    ha_send_heartbeat_interval: int = 5000  # ms
    ha_housekeeping_interval: int = 20_000  # ms
    # SYNC_MASTER: how long a send waits for a slave to confirm it (RocketMQ's slaveTimeout,
    # FLUSH_SLAVE_TIMEOUT after it), and how far behind a slave may be before sends are answered
    # SLAVE_NOT_AVAILABLE at once (haMaxGapNotInSync).
    slave_timeout: int = 3000  # ms
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    # Controller mode (RocketMQ 5): a master's send waits for every member of the in-sync set
    # (allAckInSyncStateSet), else for inSyncReplicas replicas counting the master itself (1: for
    # none); a slave not caught up for haMaxTimeSlaveNotCatchup leaves the in-sync set.
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    ha_max_time_slave_not_catchup: int = 15_000  # ms

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    @property
    def store_host_port(self) -> tuple[str, int]:
        host, _, port = self.store_host.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def is_slave(self) -> bool:
        return self.broker_role == SLAVE

    def delay_levels_ms(self) -> list[int]:
        """``message_delay_level`` in milliseconds, level 1 first (the schedule service's table)."""
        return parse_delay_levels(self.message_delay_level)
