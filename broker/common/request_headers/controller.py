"""Headers of RocketMQ 5's controller requests (CONTROLLER_* codes and BROKER_HEARTBEAT).

Field names as RocketMQ 5.1's header classes (RocketMQ's ``Long``/``Integer`` fields are ints;
``@CFNullable`` ones default to None). Bodies travel as JSON: a SyncStateSet is
``{"syncStateSet": [ids], "syncStateSetEpoch": n}``.
"""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, header, nonempty, wire


@header
class ApplyBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_APPLY_BROKER_ID (1013): claim ``appliedBrokerId``; ``registerCheckCode``
    (RocketMQ: ``brokerAddress;timestamp``) lets the same broker retry."""

    cluster_name: str = nonempty()
    broker_name: str = nonempty()
    applied_broker_id: int
    register_check_code: str = nonempty()


@header
class ApplyBrokerIdResponseHeader(CommandHeader):
    cluster_name: str | None = None
    broker_name: str | None = None


@header
class GetNextBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""

    cluster_name: str = nonempty()
    broker_name: str = nonempty()


@header
class GetNextBrokerIdResponseHeader(CommandHeader):
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@header
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    """CONTROLLER_REGISTER_BROKER (1003), RocketMQ 5.1's flow: after applying for an id."""

    cluster_name: str = nonempty()
    broker_name: str = nonempty()
    broker_id: int
    broker_address: str = nonempty()
    invoke_time: int | None = None


@header
class RegisterBrokerToControllerResponseHeader(CommandHeader):
    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@header
class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904) to the controller: liveness plus what elections rank by."""

    cluster_name: str = nonempty()
    broker_addr: str = nonempty()
    broker_name: str = nonempty()
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None


@header
class ElectMasterRequestHeader(CommandHeader):
    """CONTROLLER_ELECT_MASTER (1002): ``designateElect`` with ``brokerId`` is a manual
    switchover to that broker; without it, an election the broker ``brokerId`` triggered."""

    broker_name: str = nonempty()
    cluster_name: str = ""
    broker_id: int | None = None
    designate_elect: bool = False
    invoke_time: int | None = None


@header
class ElectMasterResponseHeader(CommandHeader):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@header
class AlterSyncStateSetRequestHeader(CommandHeader):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001) from a master; the body is the new SyncStateSet
    with the epoch the master read."""

    broker_name: str = nonempty()
    master_broker_id: int
    master_epoch: int
    invoke_time: int | None = None


@header
class AlterSyncStateSetResponseHeader(CommandHeader):
    new_sync_state_set_epoch: int | None = None


@header
class GetReplicaInfoRequestHeader(CommandHeader):
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    broker_name: str = nonempty()


@header
class GetReplicaInfoResponseHeader(CommandHeader):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None


@header
class GetMetaDataResponseHeader(CommandHeader):
    """CONTROLLER_GET_METADATA_INFO (1005): who leads the controller group."""

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool | None = wire("isLeader", default=None)
    peers: str | None = None


@header
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """NOTIFY_BROKER_ROLE_CHANGED (1008), controller → each replica of a set after its master
    changed (RocketMQ 5.1's fields); the body is the SyncStateSet."""

    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_broker_id: int | None = None
