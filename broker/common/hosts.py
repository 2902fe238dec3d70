"""Host addresses as RocketMQ writes them: ``ip:port``, IPv6 in brackets (``[::1]:10911``)."""

from __future__ import annotations

from collections.abc import Callable

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


MAX_LIST_HOSTS = 32  # of one namesrvAddr / controllerAddr list: a cluster has a handful
MAX_ADDR_CHARS = 255  # of one address (a DNS name is at most 253)


def parse_host_list(
    text: str,
    what: str = "address list",
    max_hosts: int = MAX_LIST_HOSTS,
    error: Callable[[str], Exception] = ValueError,
) -> list[str]:
    """RocketMQ's ``host:port;host:port`` list (namesrvAddr, controllerAddr, ``-n``, ``-a``) into
    its addresses, as written, in order. Blank text is the empty list; one trailing ``;`` is let
    pass as Java's ``split`` drops it. Anything else wrong is a ValueError naming ``what`` and the
    fault: an empty entry, an address without host or a port in 1-65535, an IPv6 address not in
    brackets (``[::1]:9876``: bare, its last colon could be part of the address), too many.
    ``error`` makes that exception the caller's own (the SDK's ``MQClientError``)."""
    entries = [entry.strip() for entry in text.strip().removesuffix(";").split(";")]
    if entries == [""]:
        return []
    if len(entries) > max_hosts:
        raise error(f"{what}: more than {max_hosts} addresses")
    for entry in entries:
        problem = _host_problem(entry)
        if problem:
            raise error(f"{what}: {problem}")
    return entries


def _host_problem(addr: str) -> str | None:
    if not addr:
        return "an empty entry (two ';' in a row, or one at the start)"
    if len(addr) > MAX_ADDR_CHARS:
        return f"an address longer than {MAX_ADDR_CHARS} characters"
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        return f"{addr!r} has no port (host:port)"
    if not host:
        return f"{addr!r} has no host"
    bracketed = host.startswith("[") and host.endswith("]")
    if (":" in host and not bracketed) or host.startswith("[") != host.endswith("]"):
        return f"{addr!r}: write an IPv6 address in brackets, [::1]:9876"
    if not 0 < int(port) < 65536:
        return f"{addr!r}: port {int(port)} is not in 1-65535"
    return None
