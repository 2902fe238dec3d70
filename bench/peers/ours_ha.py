"""This project as a master with a slave (issue 22): "async-master" (ASYNC_MASTER) and
"sync-master" (SYNC_MASTER, a send answered once the slave has it), driven as peer "ours".

The slave runs in its own process on this machine, so the figures include what it costs the
machine to follow (its appends and dispatch share the cores with the master and the client).
"""

from __future__ import annotations

import asyncio
import json
import time

from broker.common.codes import RequestCode
from broker.local_cluster import free_port, start_broker, write_conf
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .ours import Ours

ROLES = {"async-master": "ASYNC_MASTER", "sync-master": "SYNC_MASTER"}
SLAVE_WAIT_S = 30


class OursWithSlave(Ours):
    def __init__(
        self,
        name: str,
        flush_disk_type: str = "ASYNC_FLUSH",
        work_dir: str | None = None,
        broker_conf: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.ha_port = free_port()
        master = {**(broker_conf or {}), "brokerRole": ROLES[name], "haListenPort": str(self.ha_port)}
        super().__init__(flush_disk_type, work_dir, master)
        self.extra_conf = broker_conf or {}

    async def setup(self) -> None:
        await super().setup()  # the master and the topics
        conf = write_conf(
            self.base / "slave.conf",
            {
                "brokerName": "bench-broker",
                "brokerId": 1,
                "brokerRole": "SLAVE",
                "storePathRootDir": self.base / "slave-store",
                "flushDiskType": self.flush_disk_type,
                "haListenPort": free_port(),
                **self.extra_conf,
            },
        )
        self.slave = start_broker(conf, self.namesrv.addr, free_port(), drain=False)
        await asyncio.to_thread(self._wait_for_slave)

    def _wait_for_slave(self) -> None:
        admin = SyncRemotingClient()
        try:
            deadline = time.monotonic() + SLAVE_WAIT_S
            while time.monotonic() < deadline:
                response = admin.invoke(self.broker.addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO))
                if json.loads(response.body)["table"].get("haSlaveCount") == "1":
                    return
                time.sleep(0.1)
            raise RuntimeError(f"no slave connected to the master within {SLAVE_WAIT_S} s")
        finally:
            admin.close()

    async def teardown(self) -> None:
        self.slave.stop()
        await super().teardown()
