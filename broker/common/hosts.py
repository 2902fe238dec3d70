"""Host addresses as RocketMQ writes them: ``ip:port``, IPv6 in brackets (``[::1]:10911``)."""

from __future__ import annotations

HostPort = tuple[str, int]


def format_host(host: HostPort) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def parse_host(addr: str) -> HostPort:
    """``ip:port`` or ``[v6]:port`` into (ip, port); ValueError when there is no numeric port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} has no port")
    return host.strip("[]"), int(port)
