"""A name server and two brokers as real subprocesses (tests.harness), for the live mqadmin tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.harness import EngineProcess, free_port, keep_draining

CLUSTER = "CliCluster"


def start_namesrv() -> EngineProcess:
    return keep_draining(EngineProcess(["-m", "broker.namesrv", "--listen-port", str(free_port())]))


def start_broker(workdir: Path, name: str, namesrv_addr: str) -> EngineProcess:
    conf = workdir / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName={name}\nbrokerId=0\n"
        f"storePathRootDir={workdir / name}\nautoCreateTopicEnable=true\n"
        "autoCreateSubscriptionGroup=true\nmappedFileSizeCommitLog=4194304\n"
    )
    args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv_addr]
    return keep_draining(EngineProcess(args))


@dataclass
class LiveCluster:
    namesrv: EngineProcess
    brokers: dict[str, EngineProcess]

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def stop(self) -> None:
        for process in (*self.brokers.values(), self.namesrv):
            process.stop()


def start_cluster(workdir: Path, broker_names: tuple[str, ...] = ("broker-a", "broker-b")) -> LiveCluster:
    cluster = LiveCluster(start_namesrv(), {})
    try:
        for name in broker_names:
            cluster.brokers[name] = start_broker(workdir, name, cluster.namesrv_addr)
    except BaseException:
        cluster.stop()
        raise
    return cluster
