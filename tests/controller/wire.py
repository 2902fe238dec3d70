"""Test helpers: controllers as real processes, and simulated brokers that speak to them over the wire."""

from __future__ import annotations

import json
import secrets
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from broker.common.codes import RequestCode, ResponseCode
from broker.common.request_headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from broker.local_cluster import EngineProcess, free_port, start_controller, write_conf
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.errors import RemotingError

HEARTBEAT_TIMEOUT_MS = 1500  # what the simulated brokers announce in each heartbeat
HEARTBEAT_EVERY_S = 0.2
CALL_TIMEOUT_MS = 4000


@dataclass
class ControllerGroup:
    """1 or 3 controller processes on loopback, each with its own store directory."""

    root: Path
    size: int = 3
    extra: dict[str, object] = field(default_factory=dict)
    procs: dict[str, EngineProcess | None] = field(default_factory=dict)
    listen: dict[str, str] = field(default_factory=dict)
    confs: dict[str, Path] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)  # SIGSTOPped: left out of running()
    raft_password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    def __post_init__(self) -> None:
        ids = [f"n{i}" for i in range(self.size)]
        raft = {pid: f"127.0.0.1:{free_port()}" for pid in ids}
        self.listen = {pid: f"127.0.0.1:{free_port()}" for pid in ids}
        for pid in ids:
            settings: dict[str, object] = {
                "listenPort": self.listen[pid].rsplit(":", 1)[1],
                "controllerDLegerGroup": "test-group",
                "controllerDLegerPeers": ";".join(f"{p}-{a}" for p, a in raft.items()),
                "controllerPeerListenAddrs": ";".join(f"{p}-{a}" for p, a in self.listen.items()),
                "controllerDLegerSelfId": pid,
                "controllerStorePath": self.root / pid,
                "scanNotActiveBrokerInterval": 100,
                "controllerWriteTimeoutMillis": 2000,
                "controllerRaftPassword": self.raft_password,  # a group needs one
                **self.extra,
            }
            self.confs[pid] = write_conf(self.root / f"{pid}.conf", settings)

    def start(self, pid: str | None = None) -> None:
        for one in [pid] if pid else list(self.confs):
            self.procs[one] = start_controller(self.confs[one])

    def kill(self, pid: str) -> None:
        proc = self.procs.get(pid)
        if proc is not None:
            proc.kill()
        self.procs[pid] = None

    def pause(self, pid: str) -> None:
        proc = self.procs[pid]
        assert proc is not None
        proc.proc.send_signal(signal.SIGSTOP)
        self.paused.add(pid)

    def resume(self, pid: str) -> None:
        proc = self.procs[pid]
        assert proc is not None
        proc.proc.send_signal(signal.SIGCONT)
        self.paused.discard(pid)

    def running(self) -> list[str]:
        return [pid for pid, proc in self.procs.items() if proc is not None and pid not in self.paused]

    def stop(self) -> None:
        for pid in list(self.paused):
            self.resume(pid)
        for pid in list(self.procs):
            proc = self.procs[pid]
            if proc is not None:
                proc.stop()


class Wire:
    """Requests to controllers; ``to_leader`` tries every running controller until one leads."""

    def __init__(self, group: ControllerGroup) -> None:
        self.group = group
        self.client = SyncRemotingClient()
        self.seen_masters: dict[int, int | None] = {}  # master epoch -> master id, every answer seen
        self.split_brain: list[str] = []

    def call(
        self, pid: str, request: RemotingCommand, timeout_ms: int = CALL_TIMEOUT_MS
    ) -> RemotingCommand | None:
        try:
            return self.client.invoke(self.group.listen[pid], request, timeout_ms)
        except RemotingError:
            return None

    def to_leader(self, make) -> RemotingCommand | None:
        """The first answer that is not CONTROLLER_NOT_LEADER (None when every controller refuses)."""
        for pid in self.group.running():
            response = self.call(pid, make())
            if response is not None and response.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return response
        return None

    def leader(self) -> str | None:
        for pid in self.group.running():
            response = self.call(pid, create_request(RequestCode.CONTROLLER_GET_METADATA_INFO), 1000)
            if response is not None and response.ok and response.field("isLeader") == "true":
                return pid
        return None

    def replica_info(self, broker_name: str) -> tuple[int | None, int, list[int]] | None:
        """(master id, master epoch, in-sync ids) from the leader; every answer is noted to check
        that no epoch ever had two masters."""
        response = self.to_leader(
            lambda: create_request(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(broker_name)
            )
        )
        if response is None or not response.ok:
            return None
        raw_master = response.field("masterBrokerId")
        master = int(raw_master) if raw_master else None
        epoch = response.int_field("masterEpoch")
        if epoch in self.seen_masters and self.seen_masters[epoch] != master:
            self.split_brain.append(f"epoch {epoch}: {self.seen_masters[epoch]} and {master}")
        self.seen_masters[epoch] = master
        return master, epoch, json.loads(response.body)["syncStateSet"]

    def close(self) -> None:
        self.client.close()


class SimulatedBrokers:
    """The replicas of one broker set, as the controller sees brokers: ids applied for and
    registered over the wire, and a heartbeat thread sending BROKER_HEARTBEAT to every running
    controller for each broker marked alive."""

    def __init__(self, wire: Wire, broker_name: str, ids: list[int]) -> None:
        self.wire = wire
        self.name = broker_name
        self.ids = ids
        self.beating: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_forever, daemon=True)
        self._client = SyncRemotingClient()

    def address(self, bid: int) -> str:
        return f"127.0.0.1:{20000 + bid}"

    def start(self) -> None:
        self.beating = set(self.ids)
        self._thread.start()

    def _beat_forever(self) -> None:
        while True:
            for bid in sorted(self.beating):
                header = BrokerHeartbeatRequestHeader(
                    cluster_name="c",
                    broker_addr=self.address(bid),
                    broker_name=self.name,
                    broker_id=bid,
                    heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
                )
                for pid in self.wire.group.running():
                    try:
                        self._client.invoke(
                            self.wire.group.listen[pid],
                            create_request(RequestCode.BROKER_HEARTBEAT, header),
                            500,
                        )
                    except RemotingError:
                        pass
            if self._stop.wait(HEARTBEAT_EVERY_S):
                return

    def register(self, bid: int) -> RemotingCommand | None:
        applied = self.wire.to_leader(
            lambda: create_request(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader("c", self.name, bid, f"{self.address(bid)};1"),
            )
        )
        assert applied is not None and applied.ok, applied
        return self.wire.to_leader(
            lambda: create_request(
                RequestCode.CONTROLLER_REGISTER_BROKER,
                RegisterBrokerToControllerRequestHeader("c", self.name, bid, self.address(bid)),
            )
        )

    def alter_sync_state_set(
        self, master: int, master_epoch: int, ids: list[int], set_epoch: int
    ) -> RemotingCommand | None:
        body = json.dumps({"syncStateSet": ids, "syncStateSetEpoch": set_epoch}).encode()
        return self.wire.to_leader(
            lambda: create_request(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                AlterSyncStateSetRequestHeader(self.name, master, master_epoch),
                body,
            )
        )

    def switchover(self, bid: int) -> RemotingCommand | None:
        return self.wire.to_leader(
            lambda: create_request(
                RequestCode.CONTROLLER_ELECT_MASTER,
                ElectMasterRequestHeader(self.name, "c", bid, designate_elect=True),
            )
        )

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._client.close()
