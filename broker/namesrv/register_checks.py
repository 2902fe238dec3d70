"""What a REGISTER_BROKER must hold before the name server keeps it and hands it to clients.

RocketMQ's name server keeps whatever a registration says. Every client routed to a broker
connects to the address it registered and every route answer carries it, so a name server
(one without ACL above all) would otherwise keep and serve a 5,000-character ``brokerAddr`` or
a broker id of -1 (read by clients as no broker at all). Checked here, as a send's names are:

- the cluster, broker and topic names with the names check every topic passes;
- ``brokerAddr`` and every filter server as ``host:port`` (IPv6 bare or ``[v6]:port``), ``haServerAddr``
  likewise or empty: a host of at most 253 characters (a DNS name's limit) of the characters an
  address or host name has, and a port of 1 to 65535;
- ``brokerId`` 0 (the master) or more. A broker started with ``brokerId=-1`` in controller
  mode (RocketMQ's quick-start) registers only once the controller has given it an id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from broker.common.names import topic_problem
from broker.common.request_headers import RegisterBrokerRequestHeader

from .register_body import RegisterBody

HOST_MAX_LENGTH = 253
MAX_FILTER_SERVERS = 64
MAX_BROKER_ID = (1 << 63) - 1  # RocketMQ's brokerId is a Java long
# Letters, digits and the punctuation of IPv4, IPv6 (with a zone), and host names.
_HOST_CHARACTERS = re.compile(r"[A-Za-z0-9._:%-]+")
_PORT = re.compile(r"[0-9]{1,5}")


def address_problem(addr: object, what: str) -> str | None:
    """Why ``addr`` is not a ``host:port`` a client can connect to, or None."""
    if not isinstance(addr, str):
        return f"{what} is not a text"
    shown = addr if len(addr) <= 64 else f"{addr[:64]}... ({len(addr)} characters)"
    host, sep, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # RocketMQ's brokers write an IPv6 brokerIP1 bare ("::1:10911"): both pass
    if not sep or not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        return f"{what} {shown!r} is not host:port with a port of 1 to 65535"
    if not host or len(host) > HOST_MAX_LENGTH or not _HOST_CHARACTERS.fullmatch(host):
        return (
            f"{what} {shown!r}: the host must be 1 to {HOST_MAX_LENGTH} letters, digits or "
            "'.', '-', '_', ':', '%'"
        )
    return None


def registration_problem(header: RegisterBrokerRequestHeader, body: RegisterBody) -> str | None:
    """Why this registration may not be kept, or None."""
    problem = topic_problem(header.cluster_name) or topic_problem(header.broker_name)
    problem = problem or address_problem(header.broker_addr, "brokerAddr")
    if problem is None and header.ha_server_addr:
        problem = address_problem(header.ha_server_addr, "haServerAddr")
    if problem is None and not 0 <= header.broker_id <= MAX_BROKER_ID:
        problem = (
            f"brokerId {header.broker_id} is not 0 (the master) or more; in controller mode a "
            "broker registers once the controller has given it an id"
        )
    return (
        problem
        or _filter_servers_problem(body.filter_servers)
        or _first(map(topic_problem, body.topic_configs))
    )


def _filter_servers_problem(servers: list) -> str | None:
    if len(servers) > MAX_FILTER_SERVERS:
        return f"filterServerList has {len(servers)} entries, more than {MAX_FILTER_SERVERS}"
    return _first(address_problem(server, "a filter server") for server in servers)


def _first(problems: Iterable[str | None]) -> str | None:
    return next(filter(None, problems), None)
