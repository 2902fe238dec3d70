"""A real name server and broker for the operations-page tests (short delay levels, fast checks)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.cli.live_cluster import _drain, start_namesrv
from tests.harness import EngineProcess, free_port

CLUSTER = "OpsCluster"
# Level 1 and 2 deliver quickly; level 3 (1 h) keeps messages pending for the delayed pages.
DELAY_LEVELS = "1s 2s 1h"


def start_broker(workdir: Path, namesrv_addr: str, name: str = "broker-ops") -> EngineProcess:
    conf = workdir / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName={name}\nbrokerId=0\n"
        f"storePathRootDir={workdir / name}\nautoCreateTopicEnable=true\n"
        "autoCreateSubscriptionGroup=true\nmapedFileSizeCommitLog=4194304\n"
        f"messageDelayLevel={DELAY_LEVELS}\nflushDelayOffsetInterval=200\n"
        # The checker must not resolve the tests' half messages behind their back.
        "transactionCheckInterval=3600000\ntransactionTimeOut=3600000\n"
    )
    args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv_addr]
    return _drain(EngineProcess(args))


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value (state lives in other processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


__all__ = ["CLUSTER", "DELAY_LEVELS", "start_broker", "start_namesrv", "wait_until"]
