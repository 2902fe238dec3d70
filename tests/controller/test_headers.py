"""The controller headers carry RocketMQ 5.1's field names."""

from __future__ import annotations

from broker.common.request_headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)


def test_wire_names_are_rocketmq_field_names():
    assert BrokerHeartbeatRequestHeader.wire_names() == [
        "clusterName",
        "brokerAddr",
        "brokerName",
        "brokerId",
        "epoch",
        "maxOffset",
        "confirmOffset",
        "heartbeatTimeoutMills",
        "electionPriority",
    ]
    assert ApplyBrokerIdRequestHeader.wire_names() == [
        "clusterName",
        "brokerName",
        "appliedBrokerId",
        "registerCheckCode",
    ]
    assert set(ElectMasterRequestHeader.wire_names()) == {
        "clusterName",
        "brokerName",
        "brokerId",
        "designateElect",
        "invokeTime",
    }
    assert AlterSyncStateSetRequestHeader.wire_names() == [
        "brokerName",
        "masterBrokerId",
        "masterEpoch",
        "invokeTime",
    ]
    assert GetMetaDataResponseHeader.wire_names() == [
        "group",
        "controllerLeaderId",
        "controllerLeaderAddress",
        "isLeader",
        "peers",
    ]
    assert set(RegisterBrokerToControllerRequestHeader.wire_names()) == {
        "clusterName",
        "brokerName",
        "brokerId",
        "brokerAddress",
        "invokeTime",
    }
    assert {"masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch"} <= set(
        RegisterBrokerToControllerResponseHeader.wire_names()
    )
    assert set(ElectMasterResponseHeader.wire_names()) == {
        "masterBrokerId",
        "masterAddress",
        "masterEpoch",
        "syncStateSetEpoch",
    }
    assert set(NotifyBrokerRoleChangedRequestHeader.wire_names()) == {
        "masterAddress",
        "masterEpoch",
        "syncStateSetEpoch",
        "masterBrokerId",
    }


def test_round_trip_and_booleans():
    header = ElectMasterRequestHeader("broker-a", "c", 2, designate_elect=True)
    fields = header.to_ext_fields()
    assert fields["designateElect"] == "true" and fields["brokerId"] == "2"
    assert ElectMasterRequestHeader.from_ext_fields(fields) == header
    meta = GetMetaDataResponseHeader(is_leader=False).to_ext_fields()
    assert meta == {"isLeader": "false"}
