"""What a REGISTER_BROKER must hold before the name server keeps it and hands it to clients.

RocketMQ's name server keeps whatever a registration says. Every client routed to a broker
connects to the address it registered and every route answer carries it, so a name server
(one without ACL above all) would otherwise keep and serve a 5,000-character ``brokerAddr`` or
a broker id of -1 (read by clients as no broker at all). Checked here, as a send's names are:

- the cluster, broker and topic names with the names check every topic passes;
- ``brokerAddr`` and every filter server as ``host:port`` (IPv6 bare or ``[v6]:port``), ``haServerAddr``
  likewise or empty: a valid IPv4 or IPv6 address (not the unspecified one) or a DNS name of at
  most 253 characters, and a port of 1 to 65535 without a leading zero;
- each topic's ``perm`` and ``topicSysFlag`` within the bits RocketMQ defines;
- ``brokerId`` 0 (the master) or more. A broker started with ``brokerId=-1`` in controller
  mode (RocketMQ's quick-start) registers only once the controller has given it an id.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from broker.common.names import topic_problem
from broker.common.register_body import RegisterBody
from broker.common.request_headers import RegisterBrokerRequestHeader
from broker.common.topic_config import PERM_DEFINED, TOPIC_SYS_FLAG_DEFINED

HOST_MAX_LENGTH = 253
MAX_FILTER_SERVERS = 64
MAX_BROKER_ID = (1 << 63) - 1  # RocketMQ's brokerId is a Java long
_PORT = re.compile(r"[1-9][0-9]{0,4}")  # no sign, no leading zero
_DOTTED_NUMBERS = re.compile(r"[0-9.]+")  # a host that can only mean an IPv4 address
# A DNS label: letters, digits, hyphens inside; '_' too, which Docker and Kubernetes service
# names carry and resolvers answer for.
_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def address_problem(addr: object, what: str) -> str | None:
    """Why ``addr`` is not a ``host:port`` a client can connect to, or None."""
    if not isinstance(addr, str):
        return f"{what} is not a text"
    shown = addr if len(addr) <= 64 else f"{addr[:64]}... ({len(addr)} characters)"
    host, sep, port = addr.rpartition(":")
    if not sep or not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        return f"{what} {shown!r} is not host:port with a port of 1 to 65535 (no leading zero)"
    if not _host_usable(host):
        return (
            f"{what} {shown!r}: the host must be an IPv4 or IPv6 address or a DNS name of at most "
            f"{HOST_MAX_LENGTH} characters (labels of 1 to 63 letters, digits, '-', '_'; no '-' at an end)"
        )
    return None


def _host_usable(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        return _ip_usable(host[1:-1], ipaddress.IPv6Address)
    if ":" in host:  # RocketMQ's brokers write an IPv6 brokerIP1 bare ("::1:10911"): both pass
        return _ip_usable(host, ipaddress.IPv6Address)
    if _DOTTED_NUMBERS.fullmatch(host):
        return _ip_usable(host, ipaddress.IPv4Address)
    name = host[:-1] if host.endswith(".") else host  # a fully qualified name's root dot
    return 0 < len(name) <= HOST_MAX_LENGTH and all(map(_LABEL.fullmatch, name.split(".")))


def _ip_usable(text: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]) -> bool:
    """A valid address a client can connect to: not the unspecified one (``::``, ``0.0.0.0``)."""
    try:
        return not kind(text).is_unspecified
    except ValueError:
        return False


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
        or _first(_config_bits_problem(topic, config) for topic, config in body.topic_configs.items())
    )


def _config_bits_problem(topic: str, config: dict) -> str | None:
    """``perm`` and ``topicSysFlag`` beyond the bits RocketMQ defines: routes carry them to every
    client as sent (``register_body`` checked they are whole numbers)."""
    for field_name, defined in (("perm", PERM_DEFINED), ("topicSysFlag", TOPIC_SYS_FLAG_DEFINED)):
        value = config.get(field_name, 0)
        if not 0 <= value <= defined:
            return (
                f"{field_name}={value} of the topic {topic[:64]!r} sets bits RocketMQ does not define "
                f"(the defined ones are {defined:#x})"
            )
    return None


def _filter_servers_problem(servers: list) -> str | None:
    if len(servers) > MAX_FILTER_SERVERS:
        return f"filterServerList has {len(servers)} entries, more than {MAX_FILTER_SERVERS}"
    return _first(address_problem(server, "a filter server") for server in servers)


def _first(problems: Iterable[str | None]) -> str | None:
    return next(filter(None, problems), None)
