"""Settings every producer and consumer has (RocketMQ's ClientConfig), and the client id."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from .errors import MQClientError


def local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            # connect() on UDP sends nothing; it only picks the outgoing interface.
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


@dataclass(slots=True)
class ClientConfig:
    namesrv_addr: str = ""
    instance_name: str = "DEFAULT"
    client_ip: str = ""
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    mq_client_api_timeout_ms: int = 3_000

    def __post_init__(self) -> None:
        self.namesrv_addr = self.namesrv_addr or os.environ.get("NAMESRV_ADDR", "")
        self.client_ip = self.client_ip or local_ip()
        if self.instance_name == "DEFAULT":
            # As RocketMQ: every producer and consumer of a process shares one client instance
            # unless the application names instances apart.
            self.instance_name = str(os.getpid())

    @property
    def namesrv_addrs(self) -> list[str]:
        addrs = [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
        if not addrs:
            raise MQClientError("no name server address given (namesrv_addr or NAMESRV_ADDR)")
        return addrs

    @property
    def client_id(self) -> str:
        return f"{self.client_ip}@{self.instance_name}"
